from onmt_cont.bin.embeddings_to_torch import main

if __name__ == "__main__":
    main()
