import FleetConsole
import Foundation
import Testing

/// Renders symbols to SVG and reads them back with two independent decoders,
/// zbar (`zbarimg`) and zxing-cpp, after rasterising with librsvg. Missing
/// tools make the test fail, never skip.
@Suite("Decoding with independent readers")
struct DecoderRoundTripTests {
    struct Case: Sendable, CustomStringConvertible {
        let text: String
        let correction: QRCode.ErrorCorrection
        /// The version the encoder should pick, when the test pins it.
        let expectedVersion: Int?

        var description: String { "\(text.utf8.count) bytes at \(correction)" }
    }

    /// Two texts for each of versions 1...10, one filling the version to the
    /// last byte and one a byte longer than the previous version holds, with
    /// the level rotating so that every level appears five times; then the
    /// TOTP URI at every level, non-ASCII UTF-8 and a 250-byte URI.
    static let cases: [Case] = {
        let levels = QRCode.ErrorCorrection.allCases
        var cases: [Case] = []
        for version in 1...10 {
            for pass in 0..<2 {
                let correction = levels[(version + pass * 2) % 4]
                let length =
                    pass == 0
                    ? QRCode.maximumByteCount(version: version, correction: correction)
                    : (version == 1 ? 1 : QRCode.maximumByteCount(version: version - 1, correction: correction) + 1)
                cases.append(
                    Case(text: uriLikeText(length: length, seed: version * 2 + pass), correction: correction, expectedVersion: version))
            }
        }
        let totp =
            "otpauth://totp/fleetset:alice.smith?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=fleetset&algorithm=SHA1&digits=6&period=30"
        for correction in levels {
            cases.append(Case(text: totp, correction: correction, expectedVersion: nil))
        }
        cases.append(Case(text: "Grüße aus Köln, 世界 ✓ — ñ 🙂", correction: .quartile, expectedVersion: nil))
        cases.append(Case(text: uriLikeText(length: 250, seed: 99), correction: .medium, expectedVersion: 11))
        return cases
    }()

    @Test("zbar and zxing-cpp decode the SVG to the original text, version, level and mask")
    func decodersReadBackEveryCase() throws {
        let directory = try ExternalTools.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }

        var codes: [QRCode] = []
        for (index, testCase) in Self.cases.enumerated() {
            let code = try QRCode(testCase.text, correction: testCase.correction)
            if let expectedVersion = testCase.expectedVersion {
                #expect(code.version == expectedVersion, "\(testCase)")
            }
            codes.append(code)
            let file = directory.appendingPathComponent(Self.fileName(index) + ".svg")
            try code.svg().write(to: file, atomically: true, encoding: .utf8)
        }

        let output = try ExternalTools.runPythonScript("decode_svgs.py", arguments: [directory.path])
        let lines = output.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        try #require(lines.count == Self.cases.count, "decoder output:\n\(output)")

        for (index, columns) in lines.enumerated() {
            try #require(columns.count == 6 && columns[0] == Self.fileName(index), "unexpected line \(columns)")
            let testCase = Self.cases[index], code = codes[index]
            let expectedHex = Self.hex(testCase.text)
            let context = "\(testCase), version \(code.version), mask \(code.mask)"
            #expect(columns[1] == expectedHex, "zbar: \(context)")
            #expect(columns[2] == expectedHex, "zxing-cpp: \(context)")
            #expect(columns[3] == String(code.version), "zxing-cpp version: \(context)")
            #expect(columns[4] == Self.levelLetter(code.correction), "zxing-cpp level: \(context)")
            #expect(columns[5] == String(code.mask), "zxing-cpp mask: \(context)")
        }
        #expect(Set(codes.map(\.correction)).count == 4)
        #expect(Set(codes.map(\.mask)).count >= 4)
    }

    private static func fileName(_ index: Int) -> String {
        index < 10 ? "case-0\(index)" : "case-\(index)"
    }

    private static func hex(_ text: String) -> String {
        text.utf8.map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }

    private static func levelLetter(_ correction: QRCode.ErrorCorrection) -> String {
        switch correction {
        case .low: "L"
        case .medium: "M"
        case .quartile: "Q"
        case .high: "H"
        }
    }

    /// Deterministic text of exactly `length` ASCII bytes that looks like an
    /// otpauth URI (varied characters, so masks and runs vary).
    static func uriLikeText(length: Int, seed: Int) -> String {
        let prefix = Array("otpauth://totp/fleetset:user\(seed)?secret=".utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567abcdefghijklmnopqrstuvwxyz&=.-_%".utf8)
        var state = UInt32(truncatingIfNeeded: seed &* 2_654_435_761 &+ 1)
        var bytes: [UInt8] = []
        while bytes.count < length {
            if bytes.count < prefix.count {
                bytes.append(prefix[bytes.count])
            } else {
                state = state &* 1_664_525 &+ 1_013_904_223
                bytes.append(alphabet[Int(state >> 24) % alphabet.count])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
