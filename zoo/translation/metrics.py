"""Corpus BLEU and chrF with sacreBLEU, with their signatures."""


def corpus_scores(hypotheses, references):
    """Scores translations against one reference each with sacreBLEU.

    Args:
        hypotheses: list of str.
        references: list of str, aligned with `hypotheses`.

    Returns:
        dict with `bleu`, `chrf` (floats, 0-100), `bleu_signature`,
        `chrf_signature` and `sentences`.

    Example:
    >>> corpus_scores(["y lloró jesús."], ["Y lloró Jesús."])["chrf"] > 0
    True

    Reference:
        Post, 2018, "A Call for Clarity in Reporting BLEU Scores".
    """
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(
            "Need one reference per hypothesis. Received: "
            f"{len(hypotheses)} hypotheses, {len(references)} references"
        )
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": round(b.score, 2),
        "chrf": round(c.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "sentences": len(hypotheses),
    }
