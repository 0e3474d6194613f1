#!/usr/bin/env python
from onmt_cont.bin.train import main

if __name__ == "__main__":
    main()
