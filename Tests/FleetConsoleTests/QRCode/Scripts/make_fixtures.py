#!/usr/bin/env python3
"""Regenerates ../PythonQRCodeFixtures.swift from the PyPI `qrcode` package.

Every matrix is python-qrcode's own output with version, error correction
level AND mask forced, data forced to byte mode (python would otherwise pick
numeric/alphanumeric segments), and no border. Run from anywhere:

    python3 -m venv /tmp/qrcode && /tmp/qrcode/bin/pip install qrcode==8.2 && /tmp/qrcode/bin/python Tests/FleetConsoleTests/QRCode/Scripts/make_fixtures.py
"""
import os
import qrcode
from qrcode import constants, util, base

LEVELS = {
    "low": constants.ERROR_CORRECT_L,
    "medium": constants.ERROR_CORRECT_M,
    "quartile": constants.ERROR_CORRECT_Q,
    "high": constants.ERROR_CORRECT_H,
}

TOTP = ("otpauth://totp/fleetset:alice.smith?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
        "&issuer=fleetset&algorithm=SHA1&digits=6&period=30")

# (text, version, level, mask): all four levels, all eight masks, versions
# with 8- and 16-bit counts, with and without version information, multi-block
# layouts with two block groups, non-ASCII UTF-8, and the largest version.
FORCED = [
    ("hello", 1, "low", 0),
    ("01234567", 1, "medium", 1),
    ("QR", 1, "quartile", 2),
    ("x", 1, "high", 3),
    ("", 1, "medium", 4),
    ("Grüße, 世界 ✓", 3, "quartile", 5),
    ("https://example.com/admin", 5, "high", 6),
    (TOTP, 8, "medium", 7),
    ("version seven", 7, "low", 1),
    (TOTP, 10, "quartile", 3),
    (TOTP + "&x=" + "A" * 60, 14, "low", 4),
    ("The quick brown fox jumps over the lazy dog. " * 8, 22, "high", 2),
    ("pad me", 40, "low", 5),
]

# Texts whose automatically chosen version and mask are recorded.
AUTOMATIC = [
    ("hello", "low"),
    ("hello", "high"),
    ("otpauth://totp/a?secret=JBSWY3DP", "medium"),
    (TOTP, "low"),
    (TOTP, "medium"),
    (TOTP, "quartile"),
    (TOTP, "high"),
    ("https://example.com/admin/users/42", "medium"),
    ("Grüße, 世界 ✓", "quartile"),
    ("0123456789" * 10, "medium"),
    ("a" * 200, "low"),
    ("z" * 250, "high"),
]


def make(text, level, version=None, mask=None):
    qr = qrcode.QRCode(version=version, error_correction=LEVELS[level], border=0, mask_pattern=mask)
    qr.add_data(util.QRData(text.encode("utf-8"), mode=util.MODE_8BIT_BYTE))
    qr.make(fit=version is None)
    return qr


# --- Mask penalties -------------------------------------------------------
# python-qrcode scores each mask on a "test" rendering whose format
# information and dark module are light, and looks for finder-like patterns
# (rule 3) only inside the matrix. The Swift encoder scores the finished
# symbol, format information included, and treats the quiet zone as light in
# rule 3. Below is a second, independent implementation of the Swift
# encoder's rules, applied to python-qrcode's own matrices, so the fixture
# records which mask those rules pick without trusting the Swift code.

def run_penalty(lines):
    """Rule 1: 3 + (length - 5) for every same-colour run of 5 or more."""
    penalty = 0
    for line in lines:
        length = 1
        for i in range(1, len(line) + 1):
            if i < len(line) and line[i] == line[i - 1]:
                length += 1
            else:
                if length >= 5:
                    penalty += length - 2
                length = 1
    return penalty


def block_penalty(m):
    """Rule 2: 3 for every 2x2 block of one colour."""
    s = len(m)
    return sum(3 for y in range(s - 1) for x in range(s - 1)
               if m[y][x] == m[y][x + 1] == m[y + 1][x] == m[y + 1][x + 1])


def finder_like_penalty(lines):
    """Rule 3: 40 per 1011101 with 0000 before or after, quiet zone light."""
    before = [0, 0, 0, 0, 1, 0, 1, 1, 1, 0, 1]
    after = before[::-1]
    penalty = 0
    for line in lines:
        padded = [0] * 4 + [int(v) for v in line] + [0] * 4
        for i in range(len(padded) - 10):
            window = padded[i:i + 11]
            penalty += 40 * (window == before) + 40 * (window == after)
    return penalty


def balance_penalty(m):
    """Rule 4: 10 per full 5 % step of the dark share away from 50 %."""
    total = len(m) ** 2
    dark = sum(map(sum, m))
    return 10 * (abs(20 * dark - 10 * total) // total)


def encoder_rules_mask(qr):
    scores = []
    for mask in range(8):
        qr.makeImpl(False, mask)  # finished symbol, format information drawn
        m = [[bool(v) for v in row] for row in qr.modules]
        lines = m + [list(column) for column in zip(*m)]
        scores.append(run_penalty(lines) + block_penalty(m) + finder_like_penalty(lines) + balance_penalty(m))
    return scores.index(min(scores))


# --- Every version at every level ------------------------------------------
# Full matrices for all 160 combinations would be megabytes, so these record
# an FNV-1a 64-bit digest of the rows ("0"/"1" characters, each row followed
# by "\n"). The text fills the version to its last byte, so every block of
# every layout carries real data; QRTests builds the same text.

DIGEST_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:/?&=.-_"


def digest_text(length, version):
    return "".join(DIGEST_ALPHABET[(i * 7 + version) % len(DIGEST_ALPHABET)] for i in range(length))


def fnv1a64(text):
    value = 0xCBF29CE484222325
    for byte in text.encode("ascii"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def digest_cases():
    for version in range(1, 41):
        for level_index, level in enumerate(LEVELS):
            qr = qrcode.QRCode(version=version, error_correction=LEVELS[level], border=0,
                               mask_pattern=(version + level_index) % 8)
            data_bits = sum(b.data_count for b in base.rs_blocks(version, LEVELS[level])) * 8
            capacity = (data_bits - 4 - (8 if version <= 9 else 16)) // 8
            qr.add_data(util.QRData(digest_text(capacity, version).encode("ascii"), mode=util.MODE_8BIT_BYTE))
            qr.make(fit=False)
            rows = "".join("".join("1" if m else "0" for m in row) + "\n" for row in qr.modules)
            yield version, level, (version + level_index) % 8, capacity, fnv1a64(rows)


def swift_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def matrix_literal(modules):
    rows = ["".join("1" if m else "0" for m in row) for row in modules]
    return '"""\n' + "\n".join("        " + r for r in rows) + '\n        """'


def main():
    out = []
    out.append("// Generated by Scripts/make_fixtures.py from PyPI qrcode %s. Do not edit by hand." % qrcode_version())
    out.append("import QR\n")
    out.append("/// A symbol produced by python-qrcode with version, level and mask forced.")
    out.append("struct PythonForcedSymbol: Sendable {")
    out.append("    let text: String")
    out.append("    let version: Int")
    out.append("    let correction: QRCode.ErrorCorrection")
    out.append("    let mask: Int")
    out.append("    /// One line per row, top to bottom; 1 = dark.")
    out.append("    let rows: String")
    out.append("}\n")
    out.append("let pythonForcedSymbols: [PythonForcedSymbol] = [")
    for text, version, level, mask in FORCED:
        qr = make(text, level, version, mask)
        out.append("    PythonForcedSymbol(")
        out.append("        text: %s," % swift_string(text))
        out.append("        version: %d, correction: .%s, mask: %d," % (version, level, mask))
        out.append("        rows: " + matrix_literal(qr.modules))
        out.append("    ),")
    out.append("]\n")

    out.append("/// python-qrcode's automatic choice of version and mask for byte-mode text.")
    out.append("struct PythonAutomaticChoice: Sendable {")
    out.append("    let text: String")
    out.append("    let correction: QRCode.ErrorCorrection")
    out.append("    let version: Int")
    out.append("    /// The mask python-qrcode picks.")
    out.append("    let mask: Int")
    out.append("    /// The mask a Python re-implementation of this encoder's penalty rules picks")
    out.append("    /// on python-qrcode's matrices.")
    out.append("    let maskUnderEncoderRules: Int")
    out.append("}\n")
    out.append("let pythonAutomaticChoices: [PythonAutomaticChoice] = [")
    for text, level in AUTOMATIC:
        qr = make(text, level)
        mask = qr.best_mask_pattern()
        out.append("    PythonAutomaticChoice(text: %s, correction: .%s, version: %d, mask: %d, maskUnderEncoderRules: %d)," % (
            swift_string(text), level, qr.version, mask, encoder_rules_mask(qr)))
    out.append("]\n")

    out.append("/// Digest of python-qrcode's matrix for every version and level, forced mask,")
    out.append("/// text filling the symbol (see `digest_text` in make_fixtures.py).")
    out.append("struct PythonSymbolDigest: Sendable {")
    out.append("    let version: Int")
    out.append("    let correction: QRCode.ErrorCorrection")
    out.append("    let mask: Int")
    out.append("    let byteCount: Int")
    out.append("    let fnv1a64: UInt64")
    out.append("}\n")
    out.append("let pythonDigestAlphabet = %s\n" % swift_string(DIGEST_ALPHABET))
    out.append("let pythonSymbolDigests: [PythonSymbolDigest] = [")
    for version, level, mask, count, digest in digest_cases():
        out.append("    PythonSymbolDigest(version: %d, correction: .%s, mask: %d, byteCount: %d, fnv1a64: 0x%016X)," % (
            version, level, mask, count, digest))
    out.append("]\n")

    out.append("/// Data codewords per version (index 0 = version 1), from python-qrcode's RS block table.")
    out.append("let pythonDataCodewordCounts: [QRCode.ErrorCorrection: [Int]] = [")
    for level, constant in LEVELS.items():
        counts = []
        for version in range(1, 41):
            blocks = base.rs_blocks(version, constant)
            counts.append(sum(b.data_count for b in blocks))
        out.append("    .%s: %s," % (level, counts))
    out.append("]")

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "PythonQRCodeFixtures.swift")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", os.path.normpath(path))


def qrcode_version():
    from importlib.metadata import version
    return version("qrcode")


if __name__ == "__main__":
    main()
