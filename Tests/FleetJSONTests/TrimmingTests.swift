import FleetJSON
import Testing

@Suite("Trimming text without Foundation")
struct TrimmingTests {
    @Test("trimming goes by Unicode scalars: a CRLF at an end goes, inner spaces stay, all-trimmed text is empty")
    func trimming() {
        #expect("  a b \t".trimmingCharacters(in: " \t") == "a b")
        #expect("value\r\n".trimmingCharacters(in: " \r\n") == "value")
        #expect("\r\n\r\n".trimmingCharacters(in: "\n\r") == "")
        #expect("x".dropFirst().trimmingCharacters(in: " ") == "")
        #expect("é ".trimmingCharacters(in: " ") == "é")
    }
}
