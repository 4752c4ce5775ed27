import pytest

from zoo.data import parallel_text

pytestmark = pytest.mark.tensorflow_only


def write(tmp_path, text, name="pairs.tsv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_read_tsv_skips_empty_lines_and_handles_crlf(tmp_path):
    path = write(
        tmp_path,
        "Jesus wept.\tY lloró Jesús.\r\n\n   \nGod is love.\tDios es amor.\n",
    )
    assert parallel_text.read_tsv(path) == [
        ("Jesus wept.", "Y lloró Jesús."),
        ("God is love.", "Dios es amor."),
    ]


def test_read_tsv_selects_columns(tmp_path):
    path = write(tmp_path, "1\ta b\tc d\n2\te f\tg h\n")
    assert parallel_text.read_tsv(path, source_column=2, target_column=1) == [
        ("c d", "a b"),
        ("g h", "e f"),
    ]


def test_missing_column_error_names_line_number(tmp_path):
    path = write(tmp_path, "one\tuno\n\ntwo\tdos\nthree tres\n")
    with pytest.raises(ValueError, match=r"line 4\b.*found 1"):
        parallel_text.read_tsv(path)
    with pytest.raises(ValueError, match="line 1"):
        parallel_text.read_tsv(write(tmp_path, "a\tb\n", "x.tsv"), target_column=2)


def test_load_tsv_dataset_matches_file(tmp_path):
    lines = [("Jesus wept.", "Y lloró Jesús."), ("Hello, world!", "¡Hola, mundo!")]
    path = write(tmp_path, "".join(f"{a}\t{b}\n" for a, b in lines))
    ds = parallel_text.load_tsv(path)
    assert ds.element_spec[0].dtype.name == "string"
    items = [(s.numpy().decode("utf-8"), t.numpy().decode("utf-8")) for s, t in ds]
    assert items == lines
    swapped = parallel_text.load_tsv(path, source_column=1, target_column=0)
    first = next(iter(swapped))
    assert first[0].numpy().decode("utf-8") == "Y lloró Jesús."


def test_load_tsv_empty_file(tmp_path):
    ds = parallel_text.load_tsv(write(tmp_path, "\n\n"))
    assert list(ds) == []
