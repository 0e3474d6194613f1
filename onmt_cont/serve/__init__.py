"""The translation server (onmt_cont_server): OpenNMT-py's JSON API over HTTP, several models by id from one
configuration file, requests that arrive together translated as one batch. See docs/usage.md, "Serving"."""
