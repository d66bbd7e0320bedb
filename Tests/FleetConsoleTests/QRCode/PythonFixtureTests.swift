import FleetConsole
import Testing

/// Compares the encoder with symbols produced by the PyPI `qrcode` package
/// (see `Scripts/make_fixtures.py`, which wrote `PythonQRCodeFixtures.swift`).
@Suite("Agreement with python-qrcode")
struct PythonFixtureTests {
    @Test("Every module matches when version, level and mask are forced", arguments: pythonForcedSymbols)
    func forcedSymbolMatchesModuleForModule(_ expected: PythonForcedSymbol) throws {
        let code = try QRCode(expected.text, correction: expected.correction, version: expected.version, mask: expected.mask)
        let expectedRows = expected.rows.split(separator: "\n").map(String.init)
        #expect(code.size == expectedRows.count)
        #expect(code.version == expected.version)
        #expect(code.mask == expected.mask)

        let differences = differingModules(code, expectedRows)
        #expect(
            differences.isEmpty,
            "\(differences.count) modules differ for v\(expected.version) \(expected.correction) mask \(expected.mask); first (x, y): \(differences.prefix(8))"
        )
    }

    /// Checks the block tables, alignment positions and version information
    /// for all 40 versions at all four levels, through a digest of the matrix.
    @Test("Every version at every level matches python's matrix digest", arguments: QRCode.ErrorCorrection.allCases)
    func everyVersionMatchesDigest(correction: QRCode.ErrorCorrection) throws {
        let digests = pythonSymbolDigests.filter { $0.correction == correction }
        #expect(digests.count == 40)
        for expected in digests {
            let text = digestText(length: expected.byteCount, version: expected.version)
            let code = try QRCode(text, correction: correction, version: expected.version, mask: expected.mask)
            #expect(fnv1a64(rowsOf: code) == expected.fnv1a64, "version \(expected.version) \(correction)")
        }
    }

    @Test("Byte capacity of every version and level follows python's block table")
    func capacitiesMatchPythonBlockTable() {
        for correction in QRCode.ErrorCorrection.allCases {
            let dataCodewords = pythonDataCodewordCounts[correction] ?? []
            #expect(dataCodewords.count == 40)
            for (index, codewords) in dataCodewords.enumerated() {
                let version = index + 1
                let headerBits = 4 + (version <= 9 ? 8 : 16)
                let expected = (codewords * 8 - headerBits) / 8
                #expect(
                    QRCode.maximumByteCount(version: version, correction: correction) == expected,
                    "version \(version) \(correction)"
                )
            }
        }
    }

    @Test("The smallest version that fits is the one python picks", arguments: pythonAutomaticChoices)
    func automaticVersionMatchesPython(_ choice: PythonAutomaticChoice) throws {
        let code = try QRCode(choice.text, correction: choice.correction)
        #expect(code.version == choice.version)
    }

    /// python-qrcode and this encoder score masks slightly differently; both
    /// are readings of ISO/IEC 18004 §7.8.3, and any mask gives a valid symbol:
    ///
    /// * python scores each candidate on a "test" rendering in which the
    ///   format information and the dark module are light; this encoder
    ///   scores the finished symbol, format information included (as ZXing's
    ///   encoder does).
    /// * Rule 3 (finder-like 1:1:3:1:1 patterns with four light modules on one
    ///   side): python looks only inside the matrix, so light modules in the
    ///   quiet zone do not count; this encoder counts the quiet zone as light,
    ///   because a reader sees a pattern at the edge exactly like a finder.
    ///
    /// Each difference on its own changes the winner for some of the fixture
    /// texts, so the masks agree only for some inputs (4 of the 12). Those
    /// are checked here; the others are covered by the next test.
    @Test(
        "The mask chosen matches python's where both penalty rules pick the same mask",
        arguments: pythonAutomaticChoices.filter { $0.mask == $0.maskUnderEncoderRules }
    )
    func automaticMaskMatchesPython(_ choice: PythonAutomaticChoice) throws {
        let code = try QRCode(choice.text, correction: choice.correction)
        #expect(code.mask == choice.mask)
    }

    @Test("Enough texts have masks on which both rule sets agree")
    func agreementCasesExist() {
        #expect(pythonAutomaticChoices.filter { $0.mask == $0.maskUnderEncoderRules }.count >= 3)
    }

    /// `Scripts/make_fixtures.py` holds a second implementation of this
    /// encoder's penalty rules, in Python, run on python-qrcode's matrices
    /// for all eight masks; the Swift encoder must pick the same mask.
    @Test("The mask chosen is the one an independent implementation of the same rules picks", arguments: pythonAutomaticChoices)
    func automaticMaskMatchesReimplementedRules(_ choice: PythonAutomaticChoice) throws {
        let code = try QRCode(choice.text, correction: choice.correction)
        #expect(code.mask == choice.maskUnderEncoderRules, "python-qrcode itself picks \(choice.mask)")
    }

    /// Same as `digest_text` in make_fixtures.py.
    private func digestText(length: Int, version: Int) -> String {
        let alphabet = Array(pythonDigestAlphabet)
        return String((0..<length).map { alphabet[($0 * 7 + version) % alphabet.count] })
    }

    /// FNV-1a 64 over the rows as "0"/"1" characters, each followed by "\n".
    private func fnv1a64(rowsOf code: QRCode) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        func add(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        for y in 0..<code.size {
            for x in 0..<code.size { add(code.isDark(x: x, y: y) ? 0x31 : 0x30) }
            add(0x0A)
        }
        return hash
    }

    private func differingModules(_ code: QRCode, _ rows: [String]) -> [(Int, Int)] {
        var differences: [(Int, Int)] = []
        for (y, row) in rows.enumerated() {
            for (x, character) in row.enumerated() where code.isDark(x: x, y: y) != (character == "1") {
                differences.append((x, y))
            }
        }
        return differences
    }
}

extension PythonForcedSymbol: CustomTestStringConvertible {
    var testDescription: String { "v\(version) \(correction) mask \(mask) “\(text.prefix(24))”" }
}

extension PythonAutomaticChoice: CustomTestStringConvertible {
    var testDescription: String { "\(correction) “\(text.prefix(24))” (\(text.utf8.count) bytes)" }
}
