import FleetTestSupport
import Testing

@Suite("Looking for a leaked secret in a log")
struct SecretScanTests {
    @Test("a secret counts as itself, not as digits inside a hash or a longer number")
    func secretAsItself() {
        for leaked in ["pin=4711", "\"pin\":\"4711\"", "4711", "value 4711.", "x 4711\n"] {
            #expect(mentions(leaked, secret: "4711"), "\(leaked)")
        }
        for innocent in ["hash=35cee5dd87b02b5eab94711891d9", "hard=47110", "d-a4711", "no digits"] {
            #expect(!mentions(innocent, secret: "4711"), "\(innocent)")
        }
        // The second occurrence counts when the first is inside a word.
        #expect(mentions("ab4711 then 4711", secret: "4711"))
    }
}
