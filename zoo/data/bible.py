"""English-Spanish Bible verse pairs read from SWORD modules.

The English side is the World English Bible (`engWEB2015eb`, Debian package
`sword-text-web`), the Spanish side the Reina-Valera 1909 (`spaRV1909eb`,
Debian package `sword-text-sparv`); both are public domain. Verses are read
with `pysword`, cleaned of their OSIS markup and aligned by book, chapter and
verse. The split is by book, so no test verse has a neighbour in training.

A 400-pair training sample and a 100-pair test-book sample ship with the
package (`sample_path()`), cut by `scripts/make_samples.py`.
"""

import collections
import functools
import math
import os
import pathlib
import re

import numpy as np
from pysword.canons import canons

DEFAULT_SWORD_PATH = "/usr/share/sword"
ENGLISH_MODULE = "engWEB2015eb"
SPANISH_MODULE = "spaRV1909eb"
DEBIAN_PACKAGES = {ENGLISH_MODULE: "sword-text-web", SPANISH_MODULE: "sword-text-sparv"}

# Book names as pysword spells them (its KJV canon: the 66 shared books).
BOOKS = tuple(
    book[0] for testament in ("ot", "nt") for book in canons["kjv"][testament]
)
TEST_BOOKS = (
    "Ruth",
    "Esther",
    "Jonah",
    "Haggai",
    "Philippians",
    "Colossians",
    "James",
    "I John",
    "Jude",
)
VALIDATION_BOOKS = ("Joel", "Micah", "Titus", "Galatians")
TRAIN_BOOKS = tuple(b for b in BOOKS if b not in TEST_BOOKS + VALIDATION_BOOKS)
SPLITS = {"train": TRAIN_BOOKS, "validation": VALIDATION_BOOKS, "test": TEST_BOOKS}
SAMPLE_FILES = {"train": "bible_en_es_train.tsv", "test": "bible_en_es_test.tsv"}


def split_of(book):
    """Returns `"train"`, `"validation"` or `"test"` for a pysword book name."""
    for split, books in SPLITS.items():
        if book in books:
            return split
    raise ValueError(f"Unknown book {book!r}; expected one of {BOOKS}.")


# OSIS elements whose content is not verse text. Psalm superscriptions are
# canonical titles: kept, because the Spanish module prints them in verse 1.
_NOTE = re.compile(r"<note\b[^>]*/>|<note\b.*?</note>", re.S)
_SPEAKER = re.compile(r"<speaker\b.*?</speaker>", re.S)
_CANONICAL_TITLE = re.compile(r'<title\b[^>]*canonical="true"[^>]*>(.*?)</title>', re.S)
# Adjacent word-level elements with no space between them ("</w><w ...>").
_GLUED = re.compile(r"</(w|transChange|q)>(?=<(?:w|transChange|q)\b)")
_QUOTE_GLUED = re.compile(r"</q>(?=\w)")  # 'righteousness.”</q>Then'
# Spanish object pronouns added by the translators right after a verb are
# enclitics ("sáca" + "lo" -> "sácalo"); a written accent, an infinitive,
# gerund or imperative ending marks the verb. A heuristic, right on about 95%
# of the Reina-Valera's 106 cases (it glues "cuántonos", splits "vi lo").
_ENCLITIC = re.compile(
    r"(\w+)</w><transChange\b[^>]*>(le|lo|la|les|los|las|me|te|se|nos|os)"
    r"</transChange>",
    re.I,
)
_VERB_HOST = re.compile(r"[áéíóú]|(?:ar|er|ir|ndo|d|z)$|^(?:di|da)$", re.I)
_CHAPTER_END = re.compile(r"<chapter\b[^>]*\beID=")
_WORD_TAG = re.compile(r"</?w\b[^>]*>")
_TAG = re.compile(r"<[^>]*>")


@functools.lru_cache(maxsize=1)
def _osis_cleaner():
    from pysword.cleaner import OSISCleaner

    return OSISCleaner()


def _join_enclitic(match):
    host, pronoun = match.groups()
    proper_noun = host[0].isupper() and host[-1] in "áéíóú"  # Jehová, Josué
    if _VERB_HOST.search(host) and not proper_noun:
        return f"{host}{pronoun}</w>"
    return match.group(0)


def clean_osis(markup, enclitics=False):
    """Turns one verse of OSIS markup into plain text.

    Does what pysword's `clean=True` does (its `OSISCleaner`) plus what that
    leaves behind in these modules: words glued together where a footnote or
    a tag was removed (`God<note>..</note><w>created` -> "God created"),
    speaker labels, back matter after the chapter's end marker (the WEB
    glossary follows Revelation 22:21), and it keeps psalm superscriptions.
    The result goes through `clean_text`.

    Args:
        markup: str. Raw verse text as stored in the module.
        enclitics: bool. Join Spanish object pronouns that the translators
            added after a verb (`<w>sáca</w><transChange>lo</transChange>`
            -> "sácalo") instead of separating them. Defaults to `False`.

    Returns:
        str. Plain text.

    Example:
    >>> clean_osis('<w lemma="a">God</w><note>fn</note><w lemma="b">created</w>.')
    'God created.'
    """
    text = _CHAPTER_END.split(markup, maxsplit=1)[0]
    if enclitics:
        text = _ENCLITIC.sub(_join_enclitic, text)
    text = _NOTE.sub(" ", text)
    text = _SPEAKER.sub(" ", text)
    text = _CANONICAL_TITLE.sub(r" \1 ", text)
    text = _GLUED.sub(r"</\1> ", text)
    text = _QUOTE_GLUED.sub("</q> ", text)
    # Word tags (most of the markup) go first: pysword's cleaner would drop
    # them too, but it runs ~100 regexes over whatever text it is given.
    text = _WORD_TAG.sub("", text)
    if "<" in text:
        text = _osis_cleaner().clean(text)
    return clean_text(_TAG.sub(" ", text))


def clean_text(text):
    """Removes plain-text artefacts: pilcrows, footnote markers, brackets, spacing.

    Args:
        text: str.

    Returns:
        str. Text without `¶`, footnote markers (`*`, `†`, `‡`, `[1]`, `[a]`),
        without square brackets (their content is kept), with single spaces,
        no space before closing punctuation and none after opening marks.

    Example:
    >>> clean_text("¶ In the  beginning* [God] created ( the heavens ) .")
    'In the beginning God created (the heavens).'
    """
    text = re.sub(r"\[(?:\d+|[a-z])\]", " ", text)
    text = re.sub(r"[¶*†‡\[\]]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r" (?=[,.;:!?)’”»])", "", text)
    return re.sub(r"(?<=[(¿¡“‘«]) ", "", text)


_WORD = re.compile(r"[^\W\d_]+")


def _word_casing(texts):
    """Maps each lowercased word to its most frequent non-all-caps spelling."""
    counts = collections.Counter(_WORD.findall("\n".join(texts)))
    best = {}
    for word, count in counts.items():
        if word.isupper() and len(word) > 1:
            continue
        lower = word.lower()
        if count > best.get(lower, ("", 0))[1]:
            best[lower] = (word, count)
    return {lower: word for lower, (word, _) in best.items()}


def truecase_drop_cap(text, casing=None):
    """Undoes the typographic capitals of a chapter's first words.

    The Reina-Valera module prints a chapter's first word(s) in capitals
    ("EN el principio", "Y JACOB se fué", "Salmo de David. JEHOVÁ es mi
    pastor"). The first run of all-capital words is rewritten with each
    word's usual spelling, looked up in `casing`, and the run's first letter
    is capitalised.

    Args:
        text: str. The first verse of a chapter.
        casing: dict or None. Lowercased word -> usual spelling; unknown words
            are lowercased. Defaults to `None` (lowercase everything).

    Returns:
        str.

    Example:
    >>> truecase_drop_cap("Y JACOB se fué", {"jacob": "Jacob"})
    'Y Jacob se fué'
    """
    casing = casing or {}
    words = list(_WORD.finditer(text))
    first = next(
        (i for i, w in enumerate(words) if w.group().isupper() and len(w.group()) > 1),
        None,
    )
    if first is None:
        return text

    def adjacent(a, b):
        return not text[a.end() : b.start()].strip()

    start = first  # take in one-letter capitals before it: "Y Á SUS", "A TI"
    while start > 0 and words[start - 1].group().isupper():
        if not adjacent(words[start - 1], words[start]):
            break
        start -= 1
    end = first + 1
    while end < len(words) and words[end].group().isupper():
        if not adjacent(words[end - 1], words[end]):
            break
        end += 1
    pieces, cursor = [], 0
    for k in range(start, end):
        word = words[k]
        spelled = casing.get(word.group().lower(), word.group().lower())
        if k == start:
            spelled = spelled[:1].upper() + spelled[1:]
        pieces += [text[cursor : word.start()], spelled]
        cursor = word.end()
    return "".join(pieces) + text[cursor:]


def _missing_modules_error(sword_path, names):
    packages = " ".join(DEBIAN_PACKAGES.get(n, n) for n in names)
    return FileNotFoundError(
        f"SWORD module(s) {', '.join(names)} not found under {sword_path} "
        f"(expected {os.path.join(sword_path, 'mods.d')}/<module>.conf). On "
        f"Debian/Ubuntu install them with `apt install {packages}`, or pass "
        "`sword_path=` a SWORD data directory holding them; "
        "`sample_path()` gives the shipped sample."
    )


def _read_module(modules, name):
    """{(book, chapter, verse): raw OSIS} for every verse slot of a module."""
    bible = modules.get_bible_from_module(name)
    # pysword decompresses a module's whole book block for every verse; keep
    # the last blocks so reading a Bible takes a second, not minutes.
    if hasattr(bible, "_decompressed_text"):
        bible._decompressed_text = functools.lru_cache(maxsize=4)(
            bible._decompressed_text
        )
    verses = {}
    for books in bible.get_structure().get_books().values():
        for book in books:
            if book.name not in BOOKS:  # the WEB's deuterocanon has no pair
                continue
            for chapter, length in enumerate(book.chapter_lengths, start=1):
                texts = list(
                    bible.get_iter(books=book.name, chapters=chapter, clean=False)
                )
                if len(texts) != length:
                    raise ValueError(f"{name}: {book.name} {chapter} is incomplete.")
                for verse, text in enumerate(texts, start=1):
                    verses[(book.name, chapter, verse)] = text
    return verses


def _clean_module(raw, enclitics):
    texts = {ref: clean_osis(markup, enclitics) for ref, markup in raw.items()}
    casing = _word_casing(texts.values())
    for ref, text in texts.items():
        if ref[2] == 1 and text:
            texts[ref] = truecase_drop_cap(text, casing)
    return texts


def find_misaligned(pairs, max_shift=9, max_log_ratio=1.0):
    """Finds verse pairs whose two texts are probably not translations of each other.

    The two modules number some chapters differently (Hebrew versus English
    verse numbering, e.g. Numbers 13, Job 39-40, Jonah 2). A chapter is
    flagged when shifting its Spanish verses by a few positions matches the
    English verse lengths clearly better than no shift: the mean absolute
    log-ratio of character lengths (relative to the median ratio) is above
    0.25 unshifted and some shift cuts it by 30%. A single pair is flagged
    when its length ratio is more than `e**max_log_ratio` times off the
    median ratio.

    Args:
        pairs: dict `{(book, chapter, verse): (english, spanish)}`, texts
            non-empty.
        max_shift: int. Largest verse shift tried. Defaults to `9`.
        max_log_ratio: float. Per-pair threshold on `|log(ratio / median)|`.
            Defaults to `1.0`.

    Returns:
        A set of references to drop.

    Example:
    >>> pairs = {("Jonah", 1, v): ("x" * n, "y" * n) for v, n in
    ...          enumerate([10, 40, 20, 80, 30, 60], start=1)}
    >>> pairs[("Jonah", 1, 6)] = ("short", "y" * 200)
    >>> sorted(find_misaligned(pairs))
    [('Jonah', 1, 6)]
    """
    if not pairs:
        return set()
    log_en = {ref: math.log(len(en)) for ref, (en, _) in pairs.items()}
    log_es = {ref: math.log(len(es)) for ref, (_, es) in pairs.items()}
    log_median = float(np.median([log_es[r] - log_en[r] for r in pairs]))
    chapters = collections.defaultdict(list)
    for book, chapter, verse in pairs:
        chapters[(book, chapter)].append(verse)
    flagged = set()
    for (book, chapter), verses in chapters.items():
        size = max(verses) + 1
        en = np.full(size + 2 * max_shift, np.nan)
        es = np.full(size + 2 * max_shift, np.nan)
        for v in verses:
            en[v + max_shift] = log_en[(book, chapter, v)]
            es[v + max_shift] = log_es[(book, chapter, v)]
        scores = {}
        for shift in range(-max_shift, max_shift + 1):
            deviations = np.abs(np.roll(es, -shift) - en - log_median)
            deviations = deviations[~np.isnan(deviations)]
            enough = deviations.size >= max(3, len(verses) // 2)
            scores[shift] = deviations.mean() if enough else np.inf
        base = scores.pop(0)
        if base > 0.25 and min(scores.values()) < 0.7 * base:
            flagged.update((book, chapter, v) for v in verses)
    for ref in pairs:
        if abs(log_es[ref] - log_en[ref] - log_median) > max_log_ratio:
            flagged.add(ref)
    return flagged


@functools.lru_cache(maxsize=2)
def _verse_pairs(sword_path, english, spanish):
    """{(book, chapter, verse): (english, spanish)}, verses non-empty in both."""
    from pysword.modules import SwordModules

    conf_dir = os.path.join(sword_path, "mods.d")
    if not os.path.isdir(conf_dir):
        raise _missing_modules_error(sword_path, [english, spanish])
    modules = SwordModules(sword_path)
    found = modules.parse_modules()
    missing = [name for name in (english, spanish) if name not in found]
    if missing:
        raise _missing_modules_error(sword_path, missing)
    en = _clean_module(_read_module(modules, english), enclitics=False)
    es = _clean_module(_read_module(modules, spanish), enclitics=True)
    return {ref: (en[ref], es[ref]) for ref in es if en.get(ref) and es[ref]}


@functools.lru_cache(maxsize=4)
def _aligned(sword_path, english, spanish, drop_misaligned):
    pairs = _verse_pairs(sword_path, english, spanish)
    dropped = find_misaligned(pairs) if drop_misaligned else set()
    order = {book: i for i, book in enumerate(BOOKS)}
    refs = sorted(set(pairs) - dropped, key=lambda r: (order[r[0]], r[1], r[2]))
    return tuple((*pairs[r], f"{r[0]} {r[1]}:{r[2]}", r[0]) for r in refs)


def load_pairs(
    split="train",
    sword_path=DEFAULT_SWORD_PATH,
    english=ENGLISH_MODULE,
    spanish=SPANISH_MODULE,
    drop_misaligned=True,
):
    """Loads aligned English-Spanish verse pairs of one split.

    Verses empty in either text are skipped. With the Debian modules this
    gives 30,899 pairs in all (31,077 before `drop_misaligned`): 29,763
    train, 373 validation, 763 test.

    Args:
        split: str. `"train"`, `"validation"`, `"test"` (see `TRAIN_BOOKS`,
            `VALIDATION_BOOKS`, `TEST_BOOKS`) or `"all"`. Defaults to
            `"train"`.
        sword_path: str. SWORD data directory (holding `mods.d/`). Defaults
            to `/usr/share/sword`.
        english: str. English module name. Defaults to `"engWEB2015eb"`.
        spanish: str. Spanish module name. Defaults to `"spaRV1909eb"`.
        drop_misaligned: bool. Drop pairs flagged by `find_misaligned`
            (chapters numbered differently in the two modules, outliers in
            length ratio). Defaults to `True`.

    Returns:
        A list of `(english, spanish, reference)` string triples in canonical
        order, the reference like `"John 11:35"`.

    Raises:
        FileNotFoundError: when a module is missing (names the Debian
            packages `sword-text-web` and `sword-text-sparv`).

    Example:
    >>> pairs = load_pairs("test")  # doctest: +SKIP
    >>> pairs[0]  # doctest: +SKIP
    ('In the days when the judges judged, ...', 'Y aconteció en los días ...', 'Ruth 1:1')
    """
    if split != "all" and split not in SPLITS:
        raise ValueError(f"split must be one of {[*SPLITS, 'all']}. Received: {split=}")
    aligned = _aligned(str(sword_path), english, spanish, bool(drop_misaligned))
    return [
        (en, es, ref)
        for en, es, ref, book in aligned
        if split == "all" or book in SPLITS[split]
    ]


def load(split="train", **kwargs):
    """Loads one split as a `tf.data.Dataset` of `(english, spanish)` strings.

    Args:
        split: str. See `load_pairs`.
        **kwargs: passed to `load_pairs` (`sword_path`, `english`, ...).

    Returns:
        An unbatched `tf.data.Dataset` of `(english, spanish)` scalar
        `tf.string` tensors.

    Example:
    >>> ds = load("validation")  # doctest: +SKIP
    >>> next(iter(ds))  # doctest: +SKIP
    """
    import tensorflow as tf

    pairs = load_pairs(split, **kwargs)
    english = [p[0] for p in pairs]
    spanish = [p[1] for p in pairs]
    return tf.data.Dataset.from_tensor_slices(
        (
            tf.constant(english, tf.string, shape=[len(pairs)]),
            tf.constant(spanish, tf.string, shape=[len(pairs)]),
        )
    )


def sample_path(split="train"):
    """Path of a shipped sample TSV (`english<TAB>spanish`, UTF-8, no header).

    Args:
        split: str. `"train"` (400 pairs from training books) or `"test"`
            (100 pairs from test books, for held-out translations). Defaults
            to `"train"`.

    Returns:
        str. Read it with `zoo.data.parallel_text.load_tsv` or `read_tsv`.
    """
    if split not in SAMPLE_FILES:
        raise ValueError(
            f"split must be one of {sorted(SAMPLE_FILES)}. Received: {split=}"
        )
    return str(pathlib.Path(__file__).parent / "samples" / SAMPLE_FILES[split])
