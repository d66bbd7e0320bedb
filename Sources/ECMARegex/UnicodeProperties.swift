// Unicode property escapes `\p{…}` / `\P{…}` (ECMA-262 §22.2.2.9, tables 67–69).
//
// General_Category and binary properties are answered from the standard
// library's `Unicode.Scalar.Properties`. Script / Script_Extensions are not
// exposed by the standard library, so they are delegated to `_StringProcessing`
// (the stdlib `Regex`), which ships its own script tables; the property name is
// validated strictly against ECMA-262's list first, because `Regex` matches
// property names loosely (case- and underscore-insensitively) while ECMA-262
// requires exact spellings.

/// One resolved `\p{…}` (or, with `negated`, `\P{…}`) test.
struct PropertyTest: Sendable {
    enum Kind: Sendable {
        /// Bit i set ⇔ general category with index `generalCategoryIndex == i` matches.
        case generalCategory(UInt64)
        case binary(BinaryProperty)
        /// A one-code-point stdlib regex such as `\p{Script=Greek}`.
        case script(ScriptMatcher)
    }

    let kind: Kind
    let negated: Bool

    func matches(_ s: Unicode.Scalar) -> Bool {
        let hit: Bool
        switch kind {
        case .generalCategory(let mask):
            hit = mask & (1 << generalCategoryIndex(s.properties.generalCategory)) != 0
        case .binary(let p):
            hit = p.matches(s)
        case .script(let matcher):
            hit = matcher.matches(s)
        }
        return hit != negated
    }
}

/// Tests one code point against a Script / Script_Extensions value using the
/// stdlib `Regex`, whose tables the standard library does not otherwise expose.
///
/// `@unchecked Sendable` is sound: `Regex` is a value type that is never
/// mutated after `init`. Its only internal mutable state is the lazily lowered
/// matching program, which we force to be built here (by matching once) before
/// the value can be shared; afterwards concurrent matches only read it, and
/// each match allocates its own processor state.
final class ScriptMatcher: @unchecked Sendable {
    private let regex: Regex<Substring>

    init(property: String, value: String) throws {
        regex = try Regex("\\p{\(property)=\(value)}", as: Substring.self).matchingSemantics(.unicodeScalar)
        _ = try regex.wholeMatch(in: "a")  // compile eagerly (see above)
    }

    func matches(_ scalar: Unicode.Scalar) -> Bool {
        var string = ""
        string.unicodeScalars.append(scalar)
        return (try? regex.wholeMatch(in: string)) != nil
    }
}

/// Why a `\p{…}` body could not be resolved.
enum PropertyLookupError: Error {
    case invalid(String)
    case unsupported(String)
}

/// Resolves the text between the braces of `\p{…}`.
func resolveUnicodeProperty(_ body: String, negated: Bool) throws(PropertyLookupError) -> PropertyTest {
    if let eq = body.firstIndex(of: "=") {
        let name = String(body[..<eq])
        let value = String(body[body.index(after: eq)...])
        switch name {
        case "General_Category", "gc":
            guard let mask = generalCategoryMasks[value] else {
                throw .invalid("invalid General_Category value '\(value)'")
            }
            return PropertyTest(kind: .generalCategory(mask), negated: negated)
        case "Script", "sc", "Script_Extensions", "scx":
            guard validScriptNames.contains(value) else {
                throw .invalid("invalid Script value '\(value)'")
            }
            let swiftName = (name == "Script" || name == "sc") ? "Script" : "Script_Extensions"
            do {
                let matcher = try ScriptMatcher(property: swiftName, value: value)
                return PropertyTest(kind: .script(matcher), negated: negated)
            } catch {
                throw .unsupported("script '\(value)' is not known to this Swift runtime")
            }
        default:
            throw .invalid("invalid property name '\(name)'")
        }
    }
    if let mask = generalCategoryMasks[body] {
        return PropertyTest(kind: .generalCategory(mask), negated: negated)
    }
    if let p = binaryPropertyNames[body] {
        return PropertyTest(kind: .binary(p), negated: negated)
    }
    if unsupportedBinaryPropertyNames.contains(body) {
        throw .unsupported("binary property '\(body)' is not available without Unicode data tables")
    }
    throw .invalid("invalid property name '\(body)'")
}

// MARK: - General_Category

private func generalCategoryIndex(_ gc: Unicode.GeneralCategory) -> Int {
    switch gc {
    case .uppercaseLetter: return 0
    case .lowercaseLetter: return 1
    case .titlecaseLetter: return 2
    case .modifierLetter: return 3
    case .otherLetter: return 4
    case .nonspacingMark: return 5
    case .spacingMark: return 6
    case .enclosingMark: return 7
    case .decimalNumber: return 8
    case .letterNumber: return 9
    case .otherNumber: return 10
    case .connectorPunctuation: return 11
    case .dashPunctuation: return 12
    case .openPunctuation: return 13
    case .closePunctuation: return 14
    case .initialPunctuation: return 15
    case .finalPunctuation: return 16
    case .otherPunctuation: return 17
    case .mathSymbol: return 18
    case .currencySymbol: return 19
    case .modifierSymbol: return 20
    case .otherSymbol: return 21
    case .spaceSeparator: return 22
    case .lineSeparator: return 23
    case .paragraphSeparator: return 24
    case .control: return 25
    case .format: return 26
    case .surrogate: return 27
    case .privateUse: return 28
    case .unassigned: return 29
    @unknown default: return 29
    }
}

private func bits(_ indices: Int...) -> UInt64 {
    indices.reduce(0) { $0 | (1 << UInt64($1)) }
}

/// Every spelling ECMA-262 accepts for General_Category values (exact, case-sensitive).
private let generalCategoryMasks: [String: UInt64] = {
    let table: [([String], UInt64)] = [
        (["L", "Letter"], bits(0, 1, 2, 3, 4)),
        (["LC", "Cased_Letter"], bits(0, 1, 2)),
        (["Lu", "Uppercase_Letter"], bits(0)),
        (["Ll", "Lowercase_Letter"], bits(1)),
        (["Lt", "Titlecase_Letter"], bits(2)),
        (["Lm", "Modifier_Letter"], bits(3)),
        (["Lo", "Other_Letter"], bits(4)),
        (["M", "Mark", "Combining_Mark"], bits(5, 6, 7)),
        (["Mn", "Nonspacing_Mark"], bits(5)),
        (["Mc", "Spacing_Mark"], bits(6)),
        (["Me", "Enclosing_Mark"], bits(7)),
        (["N", "Number"], bits(8, 9, 10)),
        (["Nd", "Decimal_Number", "digit"], bits(8)),
        (["Nl", "Letter_Number"], bits(9)),
        (["No", "Other_Number"], bits(10)),
        (["P", "Punctuation", "punct"], bits(11, 12, 13, 14, 15, 16, 17)),
        (["Pc", "Connector_Punctuation"], bits(11)),
        (["Pd", "Dash_Punctuation"], bits(12)),
        (["Ps", "Open_Punctuation"], bits(13)),
        (["Pe", "Close_Punctuation"], bits(14)),
        (["Pi", "Initial_Punctuation"], bits(15)),
        (["Pf", "Final_Punctuation"], bits(16)),
        (["Po", "Other_Punctuation"], bits(17)),
        (["S", "Symbol"], bits(18, 19, 20, 21)),
        (["Sm", "Math_Symbol"], bits(18)),
        (["Sc", "Currency_Symbol"], bits(19)),
        (["Sk", "Modifier_Symbol"], bits(20)),
        (["So", "Other_Symbol"], bits(21)),
        (["Z", "Separator"], bits(22, 23, 24)),
        (["Zs", "Space_Separator"], bits(22)),
        (["Zl", "Line_Separator"], bits(23)),
        (["Zp", "Paragraph_Separator"], bits(24)),
        (["C", "Other"], bits(25, 26, 27, 28, 29)),
        (["Cc", "Control", "cntrl"], bits(25)),
        (["Cf", "Format"], bits(26)),
        (["Cs", "Surrogate"], bits(27)),
        (["Co", "Private_Use"], bits(28)),
        (["Cn", "Unassigned"], bits(29)),
    ]
    var out: [String: UInt64] = [:]
    for (names, mask) in table { for n in names { out[n] = mask } }
    return out
}()

// MARK: - Binary properties

/// The ECMA-262 binary properties that the standard library can answer.
enum BinaryProperty: Sendable {
    case any, ascii, assigned, asciiHexDigit, alphabetic, bidiControl, bidiMirrored
    case caseIgnorable, cased, changesWhenCasefolded, changesWhenCasemapped
    case changesWhenLowercased, changesWhenNFKCCasefolded, changesWhenTitlecased
    case changesWhenUppercased, dash, defaultIgnorableCodePoint, deprecated, diacritic
    case emoji, emojiComponent, emojiModifier, emojiModifierBase, emojiPresentation
    case extender, graphemeBase, graphemeExtend, hexDigit, idsBinaryOperator
    case idsTrinaryOperator, idContinue, idStart, ideographic, joinControl
    case logicalOrderException, lowercase, math, noncharacterCodePoint, patternSyntax
    case patternWhiteSpace, quotationMark, radical, regionalIndicator, sentenceTerminal
    case softDotted, terminalPunctuation, unifiedIdeograph, uppercase, variationSelector
    case whiteSpace, xidContinue, xidStart

    func matches(_ s: Unicode.Scalar) -> Bool {
        let p = s.properties
        switch self {
        case .any: return true
        case .ascii: return s.value < 0x80
        case .assigned: return p.generalCategory != .unassigned
        case .asciiHexDigit: return p.isASCIIHexDigit
        case .alphabetic: return p.isAlphabetic
        case .bidiControl: return p.isBidiControl
        case .bidiMirrored: return p.isBidiMirrored
        case .caseIgnorable: return p.isCaseIgnorable
        case .cased: return p.isCased
        case .changesWhenCasefolded: return p.changesWhenCaseFolded
        case .changesWhenCasemapped: return p.changesWhenCaseMapped
        case .changesWhenLowercased: return p.changesWhenLowercased
        case .changesWhenNFKCCasefolded: return p.changesWhenNFKCCaseFolded
        case .changesWhenTitlecased: return p.changesWhenTitlecased
        case .changesWhenUppercased: return p.changesWhenUppercased
        case .dash: return p.isDash
        case .defaultIgnorableCodePoint: return p.isDefaultIgnorableCodePoint
        case .deprecated: return p.isDeprecated
        case .diacritic: return p.isDiacritic
        case .emoji: return p.isEmoji
        case .emojiComponent:
            // emoji-data.txt Emoji_Component: small and stable, so listed here.
            let v = s.value
            return v == 0x23 || v == 0x2A || (0x30...0x39).contains(v) || v == 0x200D || v == 0x20E3
                || v == 0xFE0F || (0x1F1E6...0x1F1FF).contains(v) || (0x1F3FB...0x1F3FF).contains(v)
                || (0x1F9B0...0x1F9B3).contains(v) || (0xE0020...0xE007F).contains(v)
        case .emojiModifier: return p.isEmojiModifier
        case .emojiModifierBase: return p.isEmojiModifierBase
        case .emojiPresentation: return p.isEmojiPresentation
        case .extender: return p.isExtender
        case .graphemeBase: return p.isGraphemeBase
        case .graphemeExtend: return p.isGraphemeExtend
        case .hexDigit: return p.isHexDigit
        case .idsBinaryOperator: return p.isIDSBinaryOperator
        case .idsTrinaryOperator: return p.isIDSTrinaryOperator
        case .idContinue: return p.isIDContinue
        case .idStart: return p.isIDStart
        case .ideographic: return p.isIdeographic
        case .joinControl: return p.isJoinControl
        case .logicalOrderException: return p.isLogicalOrderException
        case .lowercase: return p.isLowercase
        case .math: return p.isMath
        case .noncharacterCodePoint: return p.isNoncharacterCodePoint
        case .patternSyntax: return p.isPatternSyntax
        case .patternWhiteSpace: return p.isPatternWhitespace
        case .quotationMark: return p.isQuotationMark
        case .radical: return p.isRadical
        case .regionalIndicator: return (0x1F1E6...0x1F1FF).contains(s.value)
        case .sentenceTerminal: return p.isSentenceTerminal
        case .softDotted: return p.isSoftDotted
        case .terminalPunctuation: return p.isTerminalPunctuation
        case .unifiedIdeograph: return p.isUnifiedIdeograph
        case .uppercase: return p.isUppercase
        case .variationSelector: return p.isVariationSelector
        case .whiteSpace: return p.isWhitespace
        case .xidContinue: return p.isXIDContinue
        case .xidStart: return p.isXIDStart
        }
    }
}

/// ECMA-262 table 68 spellings (canonical name and alias) of supported binary properties.
private let binaryPropertyNames: [String: BinaryProperty] = [
    "Any": .any, "ASCII": .ascii, "Assigned": .assigned,
    "ASCII_Hex_Digit": .asciiHexDigit, "AHex": .asciiHexDigit,
    "Alphabetic": .alphabetic, "Alpha": .alphabetic,
    "Bidi_Control": .bidiControl, "Bidi_C": .bidiControl,
    "Bidi_Mirrored": .bidiMirrored, "Bidi_M": .bidiMirrored,
    "Case_Ignorable": .caseIgnorable, "CI": .caseIgnorable,
    "Cased": .cased,
    "Changes_When_Casefolded": .changesWhenCasefolded, "CWCF": .changesWhenCasefolded,
    "Changes_When_Casemapped": .changesWhenCasemapped, "CWCM": .changesWhenCasemapped,
    "Changes_When_Lowercased": .changesWhenLowercased, "CWL": .changesWhenLowercased,
    "Changes_When_NFKC_Casefolded": .changesWhenNFKCCasefolded, "CWKCF": .changesWhenNFKCCasefolded,
    "Changes_When_Titlecased": .changesWhenTitlecased, "CWT": .changesWhenTitlecased,
    "Changes_When_Uppercased": .changesWhenUppercased, "CWU": .changesWhenUppercased,
    "Dash": .dash,
    "Default_Ignorable_Code_Point": .defaultIgnorableCodePoint, "DI": .defaultIgnorableCodePoint,
    "Deprecated": .deprecated, "Dep": .deprecated,
    "Diacritic": .diacritic, "Dia": .diacritic,
    "Emoji": .emoji,
    "Emoji_Component": .emojiComponent, "EComp": .emojiComponent,
    "Emoji_Modifier": .emojiModifier, "EMod": .emojiModifier,
    "Emoji_Modifier_Base": .emojiModifierBase, "EBase": .emojiModifierBase,
    "Emoji_Presentation": .emojiPresentation, "EPres": .emojiPresentation,
    "Extender": .extender, "Ext": .extender,
    "Grapheme_Base": .graphemeBase, "Gr_Base": .graphemeBase,
    "Grapheme_Extend": .graphemeExtend, "Gr_Ext": .graphemeExtend,
    "Hex_Digit": .hexDigit, "Hex": .hexDigit,
    "IDS_Binary_Operator": .idsBinaryOperator, "IDSB": .idsBinaryOperator,
    "IDS_Trinary_Operator": .idsTrinaryOperator, "IDST": .idsTrinaryOperator,
    "ID_Continue": .idContinue, "IDC": .idContinue,
    "ID_Start": .idStart, "IDS": .idStart,
    "Ideographic": .ideographic, "Ideo": .ideographic,
    "Join_Control": .joinControl, "Join_C": .joinControl,
    "Logical_Order_Exception": .logicalOrderException, "LOE": .logicalOrderException,
    "Lowercase": .lowercase, "Lower": .lowercase,
    "Math": .math,
    "Noncharacter_Code_Point": .noncharacterCodePoint, "NChar": .noncharacterCodePoint,
    "Pattern_Syntax": .patternSyntax, "Pat_Syn": .patternSyntax,
    "Pattern_White_Space": .patternWhiteSpace, "Pat_WS": .patternWhiteSpace,
    "Quotation_Mark": .quotationMark, "QMark": .quotationMark,
    "Radical": .radical,
    "Regional_Indicator": .regionalIndicator, "RI": .regionalIndicator,
    "Sentence_Terminal": .sentenceTerminal, "STerm": .sentenceTerminal,
    "Soft_Dotted": .softDotted, "SD": .softDotted,
    "Terminal_Punctuation": .terminalPunctuation, "Term": .terminalPunctuation,
    "Unified_Ideograph": .unifiedIdeograph, "UIdeo": .unifiedIdeograph,
    "Uppercase": .uppercase, "Upper": .uppercase,
    "Variation_Selector": .variationSelector, "VS": .variationSelector,
    "White_Space": .whiteSpace, "space": .whiteSpace,
    "XID_Continue": .xidContinue, "XIDC": .xidContinue,
    "XID_Start": .xidStart, "XIDS": .xidStart,
]

/// Valid ECMA-262 binary properties we cannot evaluate: neither the standard
/// library nor `_StringProcessing` exposes their data, and the tables are too
/// large to embed reliably.
private let unsupportedBinaryPropertyNames: Set<String> = [
    "Extended_Pictographic", "ExtPict",
]

// MARK: - Script values

/// Script names and aliases (Unicode 17 PropertyValueAliases.txt, `sc`),
/// which ECMA-262 accepts for both Script and Script_Extensions — except
/// Katakana_Or_Hiragana / Hrkt, which engines (V8) reject since no code point
/// has it.
private let validScriptNames: Set<String> = {
    let pairs = """
        Adlam Adlm Ahom Ahom Anatolian_Hieroglyphs Hluw Arabic Arab Armenian Armn Avestan Avst
        Balinese Bali Bamum Bamu Bassa_Vah Bass Batak Batk Bengali Beng Beria_Erfe Berf Bhaiksuki Bhks Bopomofo Bopo
        Brahmi Brah Braille Brai Buginese Bugi Buhid Buhd Canadian_Aboriginal Cans Carian Cari
        Caucasian_Albanian Aghb Chakma Cakm Cham Cham Cherokee Cher Chorasmian Chrs Common Zyyy
        Coptic Copt Coptic Qaac Cuneiform Xsux Cypriot Cprt Cypro_Minoan Cpmn Cyrillic Cyrl
        Deseret Dsrt Devanagari Deva Dives_Akuru Diak Dogra Dogr Duployan Dupl
        Egyptian_Hieroglyphs Egyp Elbasan Elba Elymaic Elym Ethiopic Ethi Garay Gara Georgian Geor
        Glagolitic Glag Gothic Goth Grantha Gran Greek Grek Gujarati Gujr Gunjala_Gondi Gong
        Gurmukhi Guru Gurung_Khema Gukh Han Hani Hangul Hang Hanifi_Rohingya Rohg Hanunoo Hano
        Hatran Hatr Hebrew Hebr Hiragana Hira Imperial_Aramaic Armi Inherited Zinh Inherited Qaai
        Inscriptional_Pahlavi Phli Inscriptional_Parthian Prti Javanese Java Kaithi Kthi
        Kannada Knda Katakana Kana Kawi Kawi Kayah_Li Kali
        Kharoshthi Khar Khitan_Small_Script Kits Khmer Khmr Khojki Khoj Khudawadi Sind
        Kirat_Rai Krai Lao Laoo Latin Latn Lepcha Lepc Limbu Limb Linear_A Lina Linear_B Linb
        Lisu Lisu Lycian Lyci Lydian Lydi Mahajani Mahj Makasar Maka Malayalam Mlym Mandaic Mand
        Manichaean Mani Marchen Marc Masaram_Gondi Gonm Medefaidrin Medf Meetei_Mayek Mtei
        Mende_Kikakui Mend Meroitic_Cursive Merc Meroitic_Hieroglyphs Mero Miao Plrd Modi Modi
        Mongolian Mong Mro Mroo Multani Mult Myanmar Mymr Nabataean Nbat Nag_Mundari Nagm
        Nandinagari Nand New_Tai_Lue Talu Newa Newa Nko Nkoo Nushu Nshu
        Nyiakeng_Puachue_Hmong Hmnp Ogham Ogam Ol_Chiki Olck Ol_Onal Onao Old_Hungarian Hung
        Old_Italic Ital Old_North_Arabian Narb Old_Permic Perm Old_Persian Xpeo Old_Sogdian Sogo
        Old_South_Arabian Sarb Old_Turkic Orkh Old_Uyghur Ougr Oriya Orya Osage Osge Osmanya Osma
        Pahawh_Hmong Hmng Palmyrene Palm Pau_Cin_Hau Pauc Phags_Pa Phag Phoenician Phnx
        Psalter_Pahlavi Phlp Rejang Rjng Runic Runr Samaritan Samr Saurashtra Saur Sharada Shrd
        Shavian Shaw Siddham Sidd Sidetic Sidt SignWriting Sgnw Sinhala Sinh Sogdian Sogd Sora_Sompeng Sora
        Soyombo Soyo Sundanese Sund Sunuwar Sunu Syloti_Nagri Sylo Syriac Syrc Tagalog Tglg
        Tagbanwa Tagb Tai_Le Tale Tai_Tham Lana Tai_Viet Tavt Tai_Yo Tayo Takri Takr Tamil Taml Tangsa Tnsa
        Tangut Tang Telugu Telu Thaana Thaa Thai Thai Tibetan Tibt Tifinagh Tfng Tirhuta Tirh
        Todhri Todr Tolong_Siki Tols Toto Toto Tulu_Tigalari Tutg Ugaritic Ugar Vai Vaii Vithkuqi Vith Wancho Wcho
        Warang_Citi Wara Yezidi Yezi Yi Yiii Zanabazar_Square Zanb Unknown Zzzz
        """
    return Set(pairs.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
}()
