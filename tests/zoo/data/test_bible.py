import os

import pytest

from zoo.data import bible, parallel_text

pytestmark = pytest.mark.tensorflow_only

HAS_MODULES = all(
    os.path.isfile(os.path.join(bible.DEFAULT_SWORD_PATH, "mods.d", f"{m}.conf"))
    for m in (bible.ENGLISH_MODULE, bible.SPANISH_MODULE)
)
needs_modules = pytest.mark.skipif(
    not HAS_MODULES, reason="sword-text-web / sword-text-sparv not installed"
)


def test_splits_are_disjoint_and_cover_every_book():
    from pysword.canons import canons

    canon = [b[0] for t in ("ot", "nt") for b in canons["kjv"][t]]
    assert len(canon) == 66
    train, val, test = (set(bible.SPLITS[s]) for s in ("train", "validation", "test"))
    assert not (train & val) and not (train & test) and not (val & test)
    assert train | val | test == set(canon)
    assert test == {
        "Ruth", "Esther", "Jonah", "Haggai", "Philippians",
        "Colossians", "James", "I John", "Jude",
    }  # fmt: skip
    assert val == {"Joel", "Micah", "Titus", "Galatians"}
    assert bible.split_of("Genesis") == "train"
    assert bible.split_of("I John") == "test"
    assert bible.split_of("Titus") == "validation"
    with pytest.raises(ValueError):
        bible.split_of("Tobit")


def test_clean_text_artefacts():
    assert bible.clean_text("¶ In the  beginning* God\tcreated .") == (
        "In the beginning God created."
    )
    assert bible.clean_text("the Lord[1] said† to him[a], ‡go ( now ) !") == (
        "the Lord said to him, go (now)!"
    )
    assert bible.clean_text("[In the second year] of the king ;") == (
        "In the second year of the king;"
    )
    assert bible.clean_text("¿ Dónde estabas ? ¡ Oh Jehová !") == (
        "¿Dónde estabas? ¡Oh Jehová!"
    )
    assert bible.clean_text("“ Jesus wept. ”") == "“Jesus wept.”"


def test_clean_osis_separates_words_glued_by_removed_markup():
    # A footnote between two words (Genesis 1:1 in the WEB module).
    markup = (
        '<w lemma="strong:H0430">God</w><note placement="foot"><reference '
        'type="annotateRef">1:1 </reference>The Hebrew word is “Elohim”.</note>'
        '<w lemma="strong:H1254">created</w> <w lemma="x">the</w> heavens.'
    )
    assert bible.clean_osis(markup) == "God created the heavens."
    # A footnote just before punctuation leaves no space before it.
    assert bible.clean_osis("twenty gerahs<note>a gerah is 0.5 g</note>); half") == (
        "twenty gerahs); half"
    )
    # A closing quotation element followed directly by the next word.
    assert bible.clean_osis(
        '<q who="Jesus">“Allow it now.”</q><w lemma="x">Then</w> he allowed him.'
    ) == ("“Allow it now.” Then he allowed him.")
    # Words the translators added, glued to their neighbours.
    assert bible.clean_osis(
        '<w lemma="a">hay allí</w><transChange type="added">también</transChange>'
        '<w lemma="b">bdelio</w>'
    ) == ("hay allí también bdelio")


def test_clean_osis_structure_and_back_matter():
    markup = (
        '<div type="x-milestone" subType="x-preverse" sID="pv1"/><title '
        'canonical="true" type="psalm">A Psalm by David.</title> <lg sID="g1"/> '
        '<l level="1" sID="g2"/><w lemma="a">Yahweh</w> is my shepherd;'
        '<l eID="g2" level="1"/> <l level="2" sID="g3"/>I shall lack nothing. '
        '<l eID="g3" level="2"/>'
    )
    assert bible.clean_osis(markup) == (
        "A Psalm by David. Yahweh is my shepherd; I shall lack nothing."
    )
    assert bible.clean_osis(
        "<speaker>Beloved</speaker> <l sID='x'/>Let him kiss me"
    ) == ("Let him kiss me")
    assert bible.clean_osis(
        'saints. Amen. <chapter eID="Rev.22"/><div type="glossary"/>'
        '<title type="main">Glossary</title> Abaddon is Hebrew.'
    ) == ("saints. Amen.")
    # Section headings (non-canonical titles) are dropped.
    assert bible.clean_osis('<title type="x-section">Heading</title>Text.') == "Text."


def test_clean_osis_spanish_enclitics():
    def added(host, pronoun, after=" y salió"):
        return (
            f'<w lemma="a">{host}</w><transChange type="added">{pronoun}'
            f"</transChange>{after}"
        )

    assert bible.clean_osis(added("y sáca", "lo"), enclitics=True) == "y sácalo y salió"
    assert bible.clean_osis(added("para matar", "lo"), enclitics=True) == (
        "para matarlo y salió"
    )
    # Not after a verb (no accent, no verb ending) or after a proper noun.
    assert bible.clean_osis(added("Y no", "lo"), enclitics=True) == "Y no lo y salió"
    assert bible.clean_osis(added("de Jehová", "los"), enclitics=True) == (
        "de Jehová los y salió"
    )
    # English modules keep every added word separate.
    assert bible.clean_osis(added("hold", "me")) == "hold me y salió"


def test_truecase_drop_cap():
    casing = {"jacob": "Jacob", "jehová": "Jehová", "sus": "sus"}
    assert (
        bible.truecase_drop_cap("EN el principio crió Dios")
        == "En el principio crió Dios"
    )
    assert bible.truecase_drop_cap("Y JACOB se fué", casing) == "Y Jacob se fué"
    assert bible.truecase_drop_cap("Salmo de David. JEHOVÁ es mi pastor", casing) == (
        "Salmo de David. Jehová es mi pastor"
    )
    assert bible.truecase_drop_cap("Y Á SUS discípulos dice", casing) == (
        "Y á sus discípulos dice"
    )
    assert bible.truecase_drop_cap("¿CAZARÁS tú la presa?") == "¿Cazarás tú la presa?"
    assert bible.truecase_drop_cap("Y lloró Jesús.") == "Y lloró Jesús."


def test_find_misaligned_flags_shifted_chapter_only():
    lengths = [12, 80, 25, 140, 40, 95, 18, 60, 33, 120]
    aligned = {("Genesis", 1, v): ("e" * n, "s" * n) for v, n in enumerate(lengths, 1)}
    # Chapter 2: the Spanish verse numbers run one ahead of the English.
    shifted = {
        ("Genesis", 2, v): ("e" * lengths[v - 1], "s" * lengths[v % len(lengths)])
        for v in range(1, len(lengths))
    }
    flagged = bible.find_misaligned({**aligned, **shifted})
    assert flagged == set(shifted)
    # One wildly different pair in an otherwise aligned chapter.
    outlier = dict(aligned)
    outlier[("Genesis", 1, 4)] = ("e" * 10, "s" * 300)
    assert bible.find_misaligned(outlier) == {("Genesis", 1, 4)}


def test_samples_load():
    train = parallel_text.read_tsv(bible.sample_path())
    test = parallel_text.read_tsv(bible.sample_path("test"))
    assert len(train) == 400 and len(test) == 100
    for english, spanish in train + test:
        assert english.strip() and spanish.strip()
        assert "<" not in english + spanish and "  " not in english + spanish
    assert not set(train) & set(test)
    spanish_text = " ".join(s for _, s in train)
    assert any(ch in spanish_text for ch in "áéíóúñ")  # UTF-8 accents survive
    with pytest.raises(ValueError):
        bible.sample_path("validation")


def test_missing_modules_error_names_packages(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        bible.load_pairs("train", sword_path=str(tmp_path))
    message = str(info.value)
    assert "sword-text-web" in message and "sword-text-sparv" in message
    assert str(tmp_path) in message


@needs_modules
def test_real_modules_alignment_and_splits():
    pairs = bible.load_pairs("all")
    assert len(pairs) > 30000
    by_ref = {ref: (en, es) for en, es, ref in pairs}
    assert len(by_ref) == len(pairs)  # references unique
    english, spanish = by_ref["John 11:35"]
    assert "Jesus wept" in english
    assert spanish == "Y lloró Jesús."
    assert by_ref["Genesis 1:1"] == (
        "In the beginning, God created the heavens and the earth.",
        "En el principio crió Dios los cielos y la tierra.",
    )
    for en, es, ref in pairs:
        assert en and es and "<" not in en + es and "  " not in en + es, ref

    def book(ref):
        return ref.rsplit(" ", 1)[0]

    splits = {s: bible.load_pairs(s) for s in ("train", "validation", "test")}
    assert sum(len(v) for v in splits.values()) == len(pairs)
    assert {book(r) for _, _, r in splits["test"]} == set(bible.TEST_BOOKS)
    assert {book(r) for _, _, r in splits["validation"]} == set(bible.VALIDATION_BOOKS)
    train_books = {book(r) for _, _, r in splits["train"]}
    assert not train_books & (set(bible.TEST_BOOKS) | set(bible.VALIDATION_BOOKS))
    # The versification filter only removes pairs.
    unfiltered = bible.load_pairs("all", drop_misaligned=False)
    assert {r for *_, r in pairs} < {r for *_, r in unfiltered}
    assert "Numbers 13:2" not in by_ref  # a chapter numbered differently


@needs_modules
def test_samples_are_cut_from_the_right_books():
    train = set(parallel_text.read_tsv(bible.sample_path()))
    test = set(parallel_text.read_tsv(bible.sample_path("test")))
    assert train <= {(en, es) for en, es, _ in bible.load_pairs("train")}
    assert test <= {(en, es) for en, es, _ in bible.load_pairs("test")}


@needs_modules
def test_load_dataset():
    ds = bible.load("validation")
    pairs = bible.load_pairs("validation")
    items = [(en.numpy().decode(), es.numpy().decode()) for en, es in ds]
    assert items == [(en, es) for en, es, _ in pairs]
