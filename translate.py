#!/usr/bin/env python3
if __name__ == "__main__":
    from onmt_cont.bin.launch import run

    run("translate", "main")
