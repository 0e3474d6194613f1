#!/usr/bin/env python3
if __name__ == "__main__":
    try:
        from onmt_cont.bin.launch import run
    except KeyboardInterrupt:  # Ctrl-C while Python starts: no traceback (launch.run says the rest)
        raise SystemExit(130) from None
    run("train", "console")
