from onmt_cont.bin.build_lexicon import main

if __name__ == "__main__":
    main()
