"""Byte counts as people read them, for limits and error messages."""

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def size_human(n: int) -> str:
    """`512 KiB`, `50 MiB`, `1.5 GiB`, `900 bytes`: binary units, at most one decimal."""
    if n < 1024:
        return f"{n:,} byte{'s' if n != 1 else ''}"
    value = n / 1024
    index = 0
    while value >= 1024 and index < len(_UNITS) - 1:
        value /= 1024
        index += 1
    text = f"{value:.1f}".removesuffix(".0")
    return f"{text} {_UNITS[index]}"


def too_large_message(*, what: str, size: int, limit: int) -> str:
    """`The file is 50 MiB; the limit is 512 KiB.`"""
    return f"{what} is {size_human(size)}; the limit is {size_human(limit)}."
