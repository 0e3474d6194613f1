"""Exporting a trained model for other engines: ct2.py writes a CTranslate2 folder (onmt_cont_convert) that
translate.py's CTranslate2 engine (onmt_cont/translate/ct2.py) and the bare ``ctranslate2`` package decode;
readme.py writes the README.md inside it."""
