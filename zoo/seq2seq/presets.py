"""The shipped `Seq2Seq` presets: name -> one-line description (see README.md)."""

PRESETS = {
    "seq2seq_bahdanau_bible_en_es": (
        "Bible domain only: English -> Spanish Bible verses (WEB -> RV1909); "
        "everyday sentences come out as nonsense. Bahdanau attention, 1-layer "
        "biGRU encoder (256 units), GRU decoder, maxout output, WordPiece "
        "vocabularies of 4,793 / 6,434 subwords."
    ),
}
