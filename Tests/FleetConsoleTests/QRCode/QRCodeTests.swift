import FleetConsole
import Testing

@Suite("Encoder API")
struct QRCodeTests {
    @Test("A typical TOTP URI at level M is a version 8 symbol (125 bytes; version 7 holds 122)")
    func totpURIVersion() throws {
        let uri =
            "otpauth://totp/fleetset:alice.smith?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=fleetset&algorithm=SHA1&digits=6&period=30"
        let code = try QRCode(uri)
        #expect(uri.utf8.count == 125)
        #expect(code.correction == .medium)
        #expect(code.version == 8)
        #expect(code.size == 49)
    }

    @Test("The smallest version that fits is chosen, at every level and boundary", arguments: QRCode.ErrorCorrection.allCases)
    func smallestVersionAtBoundaries(correction: QRCode.ErrorCorrection) throws {
        // Around the switch to 16-bit character counts (9 → 10), the start of
        // version information (6 → 7), and the ends of the range; encoding
        // every version at every level takes over a minute in a debug build.
        for version in [1, 2, 3, 6, 7, 9, 10, 11, 20, 26, 27, 39, 40] {
            let capacity = QRCode.maximumByteCount(version: version, correction: correction)
            #expect(try QRCode(String(repeating: "a", count: capacity), correction: correction).version == version)
            if version < 40 {
                #expect(try QRCode(String(repeating: "a", count: capacity + 1), correction: correction).version == version + 1)
            }
        }
    }

    @Test("Known byte-mode capacities from the standard's Table 7")
    func knownCapacities() {
        #expect(QRCode.maximumByteCount(version: 1, correction: .low) == 17)
        #expect(QRCode.maximumByteCount(version: 1, correction: .high) == 7)
        #expect(QRCode.maximumByteCount(version: 10, correction: .medium) == 213)
        #expect(QRCode.maximumByteCount(version: 40, correction: .low) == 2953)
        #expect(QRCode.maximumByteCount(version: 40, correction: .high) == 1273)
    }

    @Test("Text longer than version 40 holds throws TooLong saying how many bytes fit")
    func tooLong() {
        let error = #expect(throws: QRCode.TooLong.self) {
            try QRCode(String(repeating: "z", count: 1274), correction: .high)
        }
        #expect(error?.byteCount == 1274)
        #expect(error?.maximumByteCount == 1273)
        #expect(error?.correction == .high)
        do {
            _ = try QRCode(String(repeating: "é", count: 1477))  // 2954 UTF-8 bytes
            Issue.record("expected TooLong")
        } catch {
            #expect(error.byteCount == 2954)
            #expect(error.maximumByteCount == 2331)
            #expect(error.description == "Text of 2954 bytes is too long for a QR code: at most 2331 bytes fit at medium error correction")
        }
    }

    @Test("A forced version that is too small throws TooLong with that version's capacity")
    func forcedVersionTooSmall() {
        let error = #expect(throws: QRCode.TooLong.self) {
            try QRCode(String(repeating: "a", count: 18), correction: .low, version: 1)
        }
        #expect(error?.byteCount == 18)
        #expect(error?.maximumByteCount == 17)
    }

    @Test("Finder patterns, timing patterns and the dark module are in place")
    func functionPatterns() throws {
        let code = try QRCode("hello", correction: .quartile)
        let last = code.size - 1
        for (left, top) in [(0, 0), (last - 6, 0), (0, last - 6)] {
            for dy in 0..<7 {
                for dx in 0..<7 {
                    let ring = max(abs(dx - 3), abs(dy - 3))
                    #expect(code.isDark(x: left + dx, y: top + dy) == (ring != 2))
                }
            }
        }
        for index in 8...(last - 8) {
            #expect(code.isDark(x: index, y: 6) == index.isMultiple(of: 2))
            #expect(code.isDark(x: 6, y: index) == index.isMultiple(of: 2))
        }
        #expect(code.isDark(x: 8, y: code.size - 8))
    }

    @Test("Outside the matrix is quiet zone, so light")
    func outsideIsLight() throws {
        let code = try QRCode("hello")
        #expect(!code.isDark(x: -1, y: 0))
        #expect(!code.isDark(x: 0, y: code.size))
        #expect(code.isDark(x: 0, y: 0))
    }

    @Test("Encoding is deterministic and value-comparable")
    func hashableValue() throws {
        let first = try QRCode("same text"), second = try QRCode("same text")
        #expect(first == second)
        #expect(Set([first, second]).count == 1)
        #expect(try QRCode("same text", correction: .high) != first)
    }
}
