// A self-contained QR Code encoder (ISO/IEC 18004:2015, model 2, byte mode)
// with an SVG renderer. Pure Swift: no Foundation, no dependencies.
//
// Pipeline, in the order the standard describes it:
//   1. data codewords   – mode indicator, character count, payload bytes,
//                         terminator, pad bytes 0xEC / 0x11          (§7.4)
//   2. error correction – Reed–Solomon over GF(256) mod 0x11D, per block,
//                         then block interleaving                    (§7.5, §7.6)
//   3. module placement – function patterns, then the codeword bits
//                         in two-module-wide zigzag columns           (§6.3, §7.7)
//   4. masking          – all eight masks, keep the lowest penalty    (§7.8)
//   5. format/version   – BCH(15,5) and BCH(18,6) information         (§7.9, §7.10)

/// A QR Code symbol: a square matrix of dark and light modules that encodes
/// a UTF-8 string in byte mode.
///
/// ```swift
/// let code = try QRCode("otpauth://totp/fleetset:alice?secret=JBSWY3DP&issuer=fleetset")
/// let markup = code.svg(moduleSize: 4, accessibilityLabel: "TOTP enrolment QR code")
/// ```
public struct QRCode: Sendable, Hashable {
    /// The symbol version, 1...40. Version `v` is `17 + 4 * v` modules wide.
    public let version: Int
    /// The error correction level the symbol was encoded with.
    public let correction: ErrorCorrection
    /// The data mask pattern (0...7) that was applied to the symbol.
    public let mask: Int
    /// The number of modules along each side, without the quiet zone.
    public let size: Int
    /// Module colours, row by row: `modules[y * size + x]` is `true` when dark.
    private let modules: [Bool]

    /// Encodes `text` (as UTF-8, in byte mode) in the smallest version that
    /// holds it at the given error correction level, with the mask pattern
    /// that has the lowest penalty score.
    ///
    /// - Throws: ``TooLong`` when the text does not fit even in version 40.
    public init(_ text: String, correction: ErrorCorrection = .medium) throws(TooLong) {
        try self.init(bytes: Array(text.utf8), correction: correction, versions: 1...40, mask: nil)
    }

    /// Encodes `text` in exactly the given version, optionally with a fixed
    /// mask pattern instead of the lowest-penalty one. Meant for tests and for
    /// reproducing a known symbol; prefer ``init(_:correction:)``.
    ///
    /// - Parameters:
    ///   - version: 1...40.
    ///   - mask: 0...7, or `nil` to choose the mask with the lowest penalty.
    /// - Throws: ``TooLong`` when the text does not fit in that version.
    public init(_ text: String, correction: ErrorCorrection, version: Int, mask: Int? = nil) throws(TooLong) {
        precondition((1...40).contains(version), "QR code versions run from 1 to 40")
        precondition(mask.map { (0...7).contains($0) } ?? true, "QR code masks run from 0 to 7")
        try self.init(bytes: Array(text.utf8), correction: correction, versions: version...version, mask: mask)
    }

    private init(bytes: [UInt8], correction: ErrorCorrection, versions: ClosedRange<Int>, mask: Int?) throws(TooLong) {
        guard let version = versions.first(where: { bytes.count <= Self.maximumByteCount(version: $0, correction: correction) }) else {
            throw TooLong(
                byteCount: bytes.count,
                maximumByteCount: Self.maximumByteCount(version: versions.upperBound, correction: correction),
                correction: correction
            )
        }
        let layout = BlockLayout(version: version, correction: correction)
        let dataCodewords = Self.dataCodewords(for: bytes, version: version, layout: layout)
        let codewords = layout.interleavedWithErrorCorrection(dataCodewords)

        var grid = ModuleGrid(version: version)
        grid.placeCodewords(codewords)
        let chosenMask = mask ?? grid.lowestPenaltyMask(correction: correction)
        grid.applyMask(chosenMask)
        grid.drawFormatInformation(correction: correction, mask: chosenMask)

        self.version = version
        self.correction = correction
        self.mask = chosenMask
        self.size = grid.size
        self.modules = grid.isDark
    }

    /// Whether the module in column `x`, row `y` is dark; (0, 0) is the top-left
    /// corner. Coordinates outside `0..<size` lie in the quiet zone and are light.
    public func isDark(x: Int, y: Int) -> Bool {
        guard (0..<size).contains(x), (0..<size).contains(y) else { return false }
        return modules[y * size + x]
    }

    /// The most UTF-8 bytes that fit in byte mode in the given version (1...40)
    /// at the given error correction level.
    public static func maximumByteCount(version: Int, correction: ErrorCorrection) -> Int {
        precondition((1...40).contains(version), "QR code versions run from 1 to 40")
        let headerBits = 4 + characterCountBits(version: version)
        let dataBits = BlockLayout(version: version, correction: correction).dataCodewordCount * 8
        return (dataBits - headerBits) / 8
    }
}

// MARK: - Public nested types

extension QRCode {
    /// Error correction level: the share of codewords that can be restored.
    public enum ErrorCorrection: Sendable, Hashable, CaseIterable {
        /// Level L, about 7 % of codewords recoverable.
        case low
        /// Level M, about 15 % of codewords recoverable.
        case medium
        /// Level Q, about 25 % of codewords recoverable.
        case quartile
        /// Level H, about 30 % of codewords recoverable.
        case high

        /// The two bits that stand for this level in the format information
        /// (ISO/IEC 18004 Table 12; note that they are not in L, M, Q, H order).
        fileprivate var formatBits: Int {
            switch self {
            case .low: 0b01
            case .medium: 0b00
            case .quartile: 0b11
            case .high: 0b10
            }
        }

        /// Row of this level in the error correction tables.
        fileprivate var tableIndex: Int {
            switch self {
            case .low: 0
            case .medium: 1
            case .quartile: 2
            case .high: 3
            }
        }
    }

    /// Thrown when the text needs more bytes than a QR code can hold.
    public struct TooLong: Error, Sendable, Hashable, CustomStringConvertible {
        /// The UTF-8 length of the text that was asked for.
        public let byteCount: Int
        /// The most bytes that fit at ``correction`` (in the largest version allowed).
        public let maximumByteCount: Int
        /// The error correction level that was asked for.
        public let correction: ErrorCorrection

        public var description: String {
            "Text of \(byteCount) bytes is too long for a QR code: at most \(maximumByteCount) bytes fit at \(correction) error correction"
        }
    }
}

// MARK: - SVG rendering

extension QRCode {
    /// A standalone SVG document of the symbol: a white background `<rect>`
    /// and a single black `<path>` with one rectangle per horizontal run of
    /// dark modules. Colours are presentation attributes (no `style`), so the
    /// markup is allowed under a strict Content-Security-Policy.
    ///
    /// - Parameters:
    ///   - moduleSize: Width of one module in CSS pixels (≥ 1); sets `width`/`height`.
    ///   - quietZone: Light border in modules (≥ 0). The standard asks for 4.
    ///   - accessibilityLabel: Text for `aria-label`; it is XML-escaped.
    public func svg(moduleSize: Int = 4, quietZone: Int = 4, accessibilityLabel: String = "QR code") -> String {
        precondition(moduleSize >= 1, "moduleSize must be at least 1")
        precondition(quietZone >= 0, "quietZone must not be negative")
        let side = size + 2 * quietZone
        let pixels = side * moduleSize
        return """
            <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(side) \(side)" \
            width="\(pixels)" height="\(pixels)" role="img" aria-label="\(HTML.escape(accessibilityLabel))">\
            <rect x="0" y="0" width="\(side)" height="\(side)" fill="#ffffff"/>\
            <path fill="#000000" shape-rendering="crispEdges" d="\(darkRunsPath(offset: quietZone))"/>\
            </svg>

            """
    }

    /// Path data drawing every horizontal run of dark modules as a rectangle
    /// `M x y h length v1 h-length z`, in module units shifted by `offset`.
    private func darkRunsPath(offset: Int) -> String {
        var path = ""
        for y in 0..<size {
            var x = 0
            while x < size {
                guard isDark(x: x, y: y) else { x += 1; continue }
                let start = x
                while x < size, isDark(x: x, y: y) { x += 1 }
                let length = x - start
                path += "M\(start + offset) \(y + offset)h\(length)v1h-\(length)z"
            }
        }
        return path
    }
}

// MARK: - Data codewords (§7.4)

extension QRCode {
    /// Length of the character count field in byte mode (Table 3).
    fileprivate static func characterCountBits(version: Int) -> Int {
        version <= 9 ? 8 : 16
    }

    /// The data codewords: byte-mode segment, terminator, zero bits up to a
    /// byte boundary, then alternating pad codewords up to the capacity.
    fileprivate static func dataCodewords(for bytes: [UInt8], version: Int, layout: BlockLayout) -> [UInt8] {
        let byteModeIndicator = 0b0100
        let capacityBits = layout.dataCodewordCount * 8
        var bits = BitBuffer()
        bits.append(byteModeIndicator, bitCount: 4)
        bits.append(bytes.count, bitCount: characterCountBits(version: version))
        for byte in bytes { bits.append(Int(byte), bitCount: 8) }

        let terminatorLength = min(4, capacityBits - bits.count)
        bits.append(0, bitCount: terminatorLength)
        bits.append(0, bitCount: (8 - bits.count % 8) % 8)

        var codewords = bits.bytes
        let padCodewords: [UInt8] = [0xEC, 0x11]
        for padIndex in 0..<(layout.dataCodewordCount - codewords.count) {
            codewords.append(padCodewords[padIndex % 2])
        }
        return codewords
    }

    /// Bits appended most significant first, read back as whole bytes.
    fileprivate struct BitBuffer {
        private(set) var bits: [Bool] = []
        var count: Int { bits.count }

        mutating func append(_ value: Int, bitCount: Int) {
            for shift in stride(from: bitCount - 1, through: 0, by: -1) {
                bits.append((value >> shift) & 1 == 1)
            }
        }

        /// The bits packed into bytes; `count` must be a multiple of 8.
        var bytes: [UInt8] {
            stride(from: 0, to: bits.count, by: 8).map { start in
                bits[start..<start + 8].reduce(0) { byte, bit in byte << 1 | (bit ? 1 : 0) }
            }
        }
    }
}

// MARK: - Error correction blocks (§7.5, §7.6)

extension QRCode {
    /// How a version's codewords split into Reed–Solomon blocks at one level.
    ///
    /// All blocks carry the same number of error correction codewords. Data
    /// codewords are spread as evenly as possible: the first blocks ("group 1")
    /// hold `shortBlockDataCount` and the last `longBlockCount` blocks
    /// ("group 2") hold one more, which reproduces Table 9 of the standard.
    fileprivate struct BlockLayout {
        let totalCodewordCount: Int
        let errorCorrectionPerBlock: Int
        let blockCount: Int

        init(version: Int, correction: ErrorCorrection) {
            totalCodewordCount = QRCode.dataModuleCount(version: version) / 8
            errorCorrectionPerBlock = Self.errorCorrectionCodewordsPerBlock[correction.tableIndex][version - 1]
            blockCount = Self.errorCorrectionBlockCounts[correction.tableIndex][version - 1]
        }

        var dataCodewordCount: Int { totalCodewordCount - errorCorrectionPerBlock * blockCount }
        var shortBlockDataCount: Int { dataCodewordCount / blockCount }
        var longBlockCount: Int { dataCodewordCount % blockCount }

        /// Splits the data codewords into blocks, appends each block's
        /// Reed–Solomon codewords, and interleaves: first data codeword of
        /// every block, then the second, …; then the same for error correction.
        func interleavedWithErrorCorrection(_ data: [UInt8]) -> [UInt8] {
            let generator = ReedSolomon.generatorPolynomial(degree: errorCorrectionPerBlock)
            var dataBlocks: [[UInt8]] = []
            var start = 0
            for blockIndex in 0..<blockCount {
                let isLong = blockIndex >= blockCount - longBlockCount
                let length = shortBlockDataCount + (isLong ? 1 : 0)
                dataBlocks.append(Array(data[start..<start + length]))
                start += length
            }
            let errorCorrectionBlocks = dataBlocks.map { ReedSolomon.remainder(of: $0, dividedBy: generator) }
            return Self.interleaved(dataBlocks) + Self.interleaved(errorCorrectionBlocks)
        }

        private static func interleaved(_ blocks: [[UInt8]]) -> [UInt8] {
            let longest = blocks.map(\.count).max() ?? 0
            var result: [UInt8] = []
            for index in 0..<longest {
                for block in blocks where index < block.count {
                    result.append(block[index])
                }
            }
            return result
        }

        // Table 9 of ISO/IEC 18004, one row per level (L, M, Q, H), one column
        // per version 1...40.
        private static let errorCorrectionCodewordsPerBlock: [[Int]] = [
            [
                7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28,
                28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
            ],
            [
                10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26,
                26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
            ],
            [
                13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30,
                28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
            ],
            [
                17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28,
                30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
            ],
        ]

        private static let errorCorrectionBlockCounts: [[Int]] = [
            [
                1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8,
                8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21, 22, 24, 25,
            ],
            [
                1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
                17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49,
            ],
            [
                1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20,
                23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68,
            ],
            [
                1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25,
                25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81,
            ],
        ]
    }

    /// Reed–Solomon codes over GF(2⁸) built on x⁸ + x⁴ + x³ + x² + 1 (0x11D),
    /// generator roots α⁰ … α^(n−1) with α = 2 (§7.5.2, Annex A).
    fileprivate enum ReedSolomon {
        /// `powersOfAlpha[i]` is αⁱ for i in 0..<255.
        private static let powersOfAlpha: [UInt8] = {
            var powers: [UInt8] = []
            var value = 1
            for _ in 0..<255 {
                powers.append(UInt8(value))
                value <<= 1
                if value & 0x100 != 0 { value ^= 0x11D }
            }
            return powers
        }()

        /// `logarithms[v]` is the i with αⁱ = v, for v ≠ 0.
        private static let logarithms: [Int] = {
            var logarithms = [Int](repeating: 0, count: 256)
            for (exponent, power) in powersOfAlpha.enumerated() { logarithms[Int(power)] = exponent }
            return logarithms
        }()

        static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
            guard a != 0, b != 0 else { return 0 }
            return powersOfAlpha[(logarithms[Int(a)] + logarithms[Int(b)]) % 255]
        }

        /// Coefficients of ∏ (x − αⁱ) for i in 0..<degree, highest power first;
        /// the leading coefficient is always 1.
        static func generatorPolynomial(degree: Int) -> [UInt8] {
            var coefficients: [UInt8] = [1]
            for exponent in 0..<degree {
                let root = powersOfAlpha[exponent]
                // Multiply by (x + root); subtraction is addition (XOR) in GF(2⁸).
                var product = coefficients + [0]
                for index in 1..<product.count {
                    product[index] ^= multiply(coefficients[index - 1], root)
                }
                coefficients = product
            }
            return coefficients
        }

        /// The error correction codewords: the remainder of data · xⁿ divided by
        /// the monic generator of degree n, highest power first.
        static func remainder(of data: [UInt8], dividedBy generator: [UInt8]) -> [UInt8] {
            let degree = generator.count - 1
            var remainder = [UInt8](repeating: 0, count: degree)
            for codeword in data {
                let factor = codeword ^ remainder[0]
                remainder.removeFirst()
                remainder.append(0)
                for index in 0..<degree {
                    remainder[index] ^= multiply(generator[index + 1], factor)
                }
            }
            return remainder
        }
    }
}

// MARK: - Symbol geometry (§6.3)

extension QRCode {
    /// Centre coordinates of the alignment patterns, per version (Annex E, Table E.1).
    /// Patterns sit at every pair of these, except the three that would
    /// overlap a finder pattern.
    fileprivate static let alignmentPatternCentres: [[Int]] = [
        [], [6, 18], [6, 22], [6, 26], [6, 30], [6, 34],
        [6, 22, 38], [6, 24, 42], [6, 26, 46], [6, 28, 50], [6, 30, 54], [6, 32, 58], [6, 34, 62],
        [6, 26, 46, 66], [6, 26, 48, 70], [6, 26, 50, 74], [6, 30, 54, 78], [6, 30, 56, 82],
        [6, 30, 58, 86], [6, 34, 62, 90],
        [6, 28, 50, 72, 94], [6, 26, 50, 74, 98], [6, 30, 54, 78, 102], [6, 28, 54, 80, 106],
        [6, 32, 58, 84, 110], [6, 30, 58, 86, 114], [6, 34, 62, 90, 118],
        [6, 26, 50, 74, 98, 122], [6, 30, 54, 78, 102, 126], [6, 26, 52, 78, 104, 130],
        [6, 30, 56, 82, 108, 134], [6, 34, 60, 86, 112, 138], [6, 30, 58, 86, 114, 142],
        [6, 34, 62, 90, 118, 146],
        [6, 30, 54, 78, 102, 126, 150], [6, 24, 50, 76, 102, 128, 154], [6, 28, 54, 80, 106, 132, 158],
        [6, 32, 58, 84, 110, 136, 162], [6, 26, 54, 82, 110, 138, 166], [6, 30, 58, 86, 114, 142, 170],
    ]

    /// Modules left for codewords (data, error correction and remainder bits)
    /// once the function patterns and format/version areas are taken out.
    fileprivate static func dataModuleCount(version: Int) -> Int {
        let size = 17 + 4 * version
        let finderSeparatorsAndFormat = 3 * 8 * 8 + 2 * 15 + 1  // + the dark module
        let timing = 2 * (size - 16)
        let alignmentPerSide = alignmentPatternCentres[version - 1].count
        let alignmentCount = max(0, alignmentPerSide * alignmentPerSide - 3)
        // Alignment patterns centred on row or column 6 cover 5 timing modules.
        let alignmentOnTiming = max(0, 2 * (alignmentPerSide - 2))
        let alignment = 25 * alignmentCount - 5 * alignmentOnTiming
        let versionInformation = version >= 7 ? 2 * 18 : 0
        return size * size - finderSeparatorsAndFormat - timing - alignment - versionInformation
    }
}

// MARK: - Module placement, masking and format information (§7.7–§7.10)

extension QRCode {
    /// The symbol under construction: module colours plus which modules belong
    /// to function patterns (and so are neither data nor masked).
    fileprivate struct ModuleGrid {
        let size: Int
        private(set) var isDark: [Bool]
        private var isFunction: [Bool]

        /// A grid with all function patterns drawn: finders with separators,
        /// timing, alignment, the dark module, version information, and the
        /// format information area reserved.
        init(version: Int) {
            size = 17 + 4 * version
            isDark = Array(repeating: false, count: size * size)
            isFunction = Array(repeating: false, count: size * size)
            drawTimingPatterns()
            drawFinderPatterns()
            drawAlignmentPatterns(version: version)
            reserveFormatInformation()
            if version >= 7 { drawVersionInformation(version: version) }
        }

        private mutating func set(x: Int, y: Int, dark: Bool, function: Bool = true) {
            isDark[y * size + x] = dark
            if function { isFunction[y * size + x] = true }
        }

        private func isFunctionModule(x: Int, y: Int) -> Bool { isFunction[y * size + x] }

        // MARK: Function patterns

        /// Alternating modules, dark first, along row 6 and column 6.
        private mutating func drawTimingPatterns() {
            for index in 0..<size {
                set(x: 6, y: index, dark: index % 2 == 0)
                set(x: index, y: 6, dark: index % 2 == 0)
            }
        }

        /// The three 7×7 finders with their one-module light separators. In
        /// the 9×9 square around a finder's centre, a module's ring (Chebyshev
        /// distance from the centre) decides its colour: rings 0, 1 and 3 are
        /// dark; ring 2 and the separator ring 4 are light.
        private mutating func drawFinderPatterns() {
            for (centreX, centreY) in [(3, 3), (size - 4, 3), (3, size - 4)] {
                for dy in -4...4 {
                    for dx in -4...4 {
                        let x = centreX + dx, y = centreY + dy
                        guard (0..<size).contains(x), (0..<size).contains(y) else { continue }
                        let ring = max(abs(dx), abs(dy))
                        set(x: x, y: y, dark: ring != 2 && ring != 4)
                    }
                }
            }
        }

        /// 5×5 alignment patterns: dark centre, light ring, dark border.
        private mutating func drawAlignmentPatterns(version: Int) {
            let centres = QRCode.alignmentPatternCentres[version - 1]
            guard let first = centres.first, let last = centres.last else { return }
            for centreY in centres {
                for centreX in centres {
                    let overlapsFinder =
                        (centreX == first && centreY == first)
                        || (centreX == last && centreY == first)
                        || (centreX == first && centreY == last)
                    if overlapsFinder { continue }
                    for dy in -2...2 {
                        for dx in -2...2 {
                            set(x: centreX + dx, y: centreY + dy, dark: max(abs(dx), abs(dy)) != 1)
                        }
                    }
                }
            }
        }

        /// Marks both copies of the format information, and the dark module
        /// beside the lower-left finder, as function modules.
        private mutating func reserveFormatInformation() {
            for position in Self.formatInformationPositions(size: size) {
                set(x: position.first.x, y: position.first.y, dark: false)
                set(x: position.second.x, y: position.second.y, dark: false)
            }
            set(x: 8, y: size - 8, dark: true)
        }

        /// Where bit `i` (0 = least significant) of the 15-bit format
        /// information goes, in both copies (§7.9.1, Figure 25).
        private static func formatInformationPositions(size: Int) -> [(first: (x: Int, y: Int), second: (x: Int, y: Int))] {
            (0..<15).map { bit in
                // First copy: up column 8 then left along row 8, around the
                // top-left finder, skipping the timing patterns.
                let first: (x: Int, y: Int) =
                    switch bit {
                    case 0...5: (8, bit)
                    case 6: (8, 7)
                    case 7: (8, 8)
                    case 8: (7, 8)
                    default: (14 - bit, 8)
                    }
                // Second copy: row 8 under the top-right finder, right to left,
                // then column 8 beside the bottom-left finder, top to bottom.
                let second: (x: Int, y: Int) = bit < 8 ? (size - 1 - bit, 8) : (8, size - 15 + bit)
                return (first, second)
            }
        }

        /// The 18-bit version information in the 6×3 blocks above the
        /// lower-left finder and left of the upper-right finder (§7.10).
        private mutating func drawVersionInformation(version: Int) {
            let bits = QRCode.bchCode(data: version, generator: 0x1F25)
            for bit in 0..<18 {
                let dark = (bits >> bit) & 1 == 1
                let near = bit / 3, far = size - 11 + bit % 3
                set(x: far, y: near, dark: dark)
                set(x: near, y: far, dark: dark)
            }
        }

        /// Writes the BCH(15,5)-protected level and mask into both copies.
        mutating func drawFormatInformation(correction: ErrorCorrection, mask: Int) {
            let data = correction.formatBits << 3 | mask
            let bits = QRCode.bchCode(data: data, generator: 0x537) ^ 0x5412
            for (bit, position) in Self.formatInformationPositions(size: size).enumerated() {
                let dark = (bits >> bit) & 1 == 1
                set(x: position.first.x, y: position.first.y, dark: dark)
                set(x: position.second.x, y: position.second.y, dark: dark)
            }
        }

        // MARK: Codeword placement

        /// Places the codeword bits, most significant first, in two-module-wide
        /// columns from the right edge, alternately upwards and downwards,
        /// skipping function modules and the vertical timing column. Modules
        /// left over at the end are remainder bits and stay light (0).
        mutating func placeCodewords(_ codewords: [UInt8]) {
            var bitIndex = 0
            let bitCount = codewords.count * 8
            var upwards = true
            var rightColumn = size - 1
            while rightColumn > 0 {
                if rightColumn == 6 { rightColumn = 5 }
                let rows = upwards ? Array((0..<size).reversed()) : Array(0..<size)
                for y in rows {
                    for x in [rightColumn, rightColumn - 1] where !isFunctionModule(x: x, y: y) {
                        if bitIndex < bitCount {
                            let codeword = codewords[bitIndex / 8]
                            let dark = (codeword >> (7 - bitIndex % 8)) & 1 == 1
                            set(x: x, y: y, dark: dark, function: false)
                        }
                        bitIndex += 1
                    }
                }
                upwards.toggle()
                rightColumn -= 2
            }
        }

        // MARK: Masking

        /// Inverts every non-function module for which the mask condition
        /// holds (§7.8.2, Table 10; `i` is the row, `j` the column).
        mutating func applyMask(_ mask: Int) {
            for y in 0..<size {
                for x in 0..<size where !isFunctionModule(x: x, y: y) && Self.maskInverts(mask, row: y, column: x) {
                    isDark[y * size + x].toggle()
                }
            }
        }

        private static func maskInverts(_ mask: Int, row i: Int, column j: Int) -> Bool {
            switch mask {
            case 0: (i + j) % 2 == 0
            case 1: i % 2 == 0
            case 2: j % 3 == 0
            case 3: (i + j) % 3 == 0
            case 4: (i / 2 + j / 3) % 2 == 0
            case 5: (i * j) % 2 + (i * j) % 3 == 0
            case 6: ((i * j) % 2 + (i * j) % 3) % 2 == 0
            default: ((i + j) % 2 + (i * j) % 3) % 2 == 0
            }
        }

        /// The mask whose finished symbol (masked, with its format
        /// information drawn) scores the lowest penalty; ties go to the lower
        /// mask number.
        func lowestPenaltyMask(correction: ErrorCorrection) -> Int {
            var best = (mask: 0, penalty: Int.max)
            for mask in 0...7 {
                var candidate = self
                candidate.applyMask(mask)
                candidate.drawFormatInformation(correction: correction, mask: mask)
                let penalty = candidate.penalty()
                if penalty < best.penalty { best = (mask, penalty) }
            }
            return best.mask
        }

        // MARK: Penalty score (§7.8.3, Table 11)

        func penalty() -> Int {
            let lines = rows() + columns()
            let runs = lines.reduce(0) { $0 + Self.sameColourRunPenalty($1) }
            let finderLike = lines.reduce(0) { $0 + Self.finderLikePenalty($1) }
            return runs + twoByTwoBlockPenalty() + finderLike + darkProportionPenalty()
        }

        private func rows() -> [[Bool]] {
            (0..<size).map { y in Array(isDark[y * size..<(y + 1) * size]) }
        }

        private func columns() -> [[Bool]] {
            (0..<size).map { x in
                var column = [Bool](repeating: false, count: size)
                for y in 0..<size { column[y] = isDark[y * size + x] }
                return column
            }
        }

        /// Rule 1: each run of five or more same-coloured modules in a row or
        /// column scores 3, plus 1 for every module beyond five.
        private static func sameColourRunPenalty(_ line: [Bool]) -> Int {
            var penalty = 0
            var runLength = 0
            for index in 0..<line.count {
                let module = line[index]
                runLength = index > 0 && line[index - 1] == module ? runLength + 1 : 1
                let runEnds = index == line.count - 1 || line[index + 1] != module
                if runEnds && runLength >= 5 { penalty += 3 + (runLength - 5) }
            }
            return penalty
        }

        /// Rule 2: each 2×2 block of one colour scores 3 (blocks may overlap).
        private func twoByTwoBlockPenalty() -> Int {
            var penalty = 0
            for y in 0..<size - 1 {
                for x in 0..<size - 1 {
                    let colour = isDark[y * size + x]
                    if isDark[y * size + x + 1] == colour,
                        isDark[(y + 1) * size + x] == colour,
                        isDark[(y + 1) * size + x + 1] == colour
                    {
                        penalty += 3
                    }
                }
            }
            return penalty
        }

        /// Rule 3: each dark-light-dark-dark-dark-light-dark (1:1:3:1:1)
        /// pattern with four light modules before it, or after it, scores 40
        /// (so 80 with light on both sides). Modules beyond the edge count as
        /// light: they are the quiet zone, so a pattern at the edge looks just
        /// like a finder to a reader.
        private static func finderLikePenalty(_ line: [Bool]) -> Int {
            let finderCore = [true, false, true, true, true, false, true]
            var penalty = 0
            for start in 0...(line.count - finderCore.count) where matches(finderCore, in: line, at: start) {
                if isLight(line, start - 4..<start) { penalty += 40 }
                if isLight(line, start + finderCore.count..<start + finderCore.count + 4) { penalty += 40 }
            }
            return penalty
        }

        private static func matches(_ pattern: [Bool], in line: [Bool], at start: Int) -> Bool {
            for offset in 0..<pattern.count where line[start + offset] != pattern[offset] {
                return false
            }
            return true
        }

        /// Whether every module of `line` in `range` is light; positions
        /// outside the line are the quiet zone, which is light.
        private static func isLight(_ line: [Bool], _ range: Range<Int>) -> Bool {
            for index in range where index >= 0 && index < line.count && line[index] {
                return false
            }
            return true
        }

        /// Rule 4: 10 points for every full 5 % by which the share of dark
        /// modules departs from 50 %.
        private func darkProportionPenalty() -> Int {
            let total = isDark.count
            let dark = isDark.reduce(0) { $0 + ($1 ? 1 : 0) }
            // |dark / total − 1/2| measured in 5 % steps = |20·dark − 10·total| / total.
            let fivePercentSteps = abs(20 * dark - 10 * total) / total
            return 10 * fivePercentSteps
        }
    }
}

// MARK: - BCH codes for format and version information

extension QRCode {
    /// `data` followed by the remainder of `data · x^k` divided by `generator`
    /// (a polynomial over GF(2) of degree k, written as a bit pattern).
    fileprivate static func bchCode(data: Int, generator: Int) -> Int {
        let checkBitCount = bitLength(generator) - 1
        var remainder = data << checkBitCount
        while bitLength(remainder) > checkBitCount {
            remainder ^= generator << (bitLength(remainder) - bitLength(generator))
        }
        return data << checkBitCount | remainder
    }

    private static func bitLength(_ value: Int) -> Int {
        Int.bitWidth - value.leadingZeroBitCount
    }
}
