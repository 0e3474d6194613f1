#!/usr/bin/env python
from onmt_cont.bin.translate import main

if __name__ == "__main__":
    main()
