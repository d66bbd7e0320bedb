import FleetJSON
import Testing

/// JSONTestSuite (github.com/nst/JSONTestSuite): `y_` files must parse, `n_` files must be
/// refused, `i_` files (implementation-defined) must neither crash nor hang.
///
/// Two `y_` files hold a duplicate key, which RFC 8259's grammar allows and fleetset's settings
/// reader refuses on purpose (a settings file with two `duration` keys is ambiguous). They are
/// accepted with `duplicateKeys: .keepLast` and refused, as duplicates, by default.
@Suite(
    "JSONTestSuite conformance",
    .enabled(if: SharedData.hasJSONTestSuite, "../shared/data/json-test-suite not found beside the repository"))
struct JSONTestSuiteTests {
    static let duplicateKeyFiles = ["y_object_duplicated_key.json", "y_object_duplicated_key_and_value.json"]

    @Test("every y_ document is accepted", arguments: SharedData.jsonTestFiles("y_"))
    func accepts(file: String) throws {
        let bytes = try SharedData.bytes(file)
        #expect(throws: Never.self, "\(file)") { try JSONParser.parse(bytes, duplicateKeys: .keepLast) }
        if Self.duplicateKeyFiles.contains(file) {
            let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes) }
            #expect(error?.message.hasPrefix("duplicate key") == true)
        } else {
            #expect(throws: Never.self, "\(file)") { try JSONParser.parse(bytes) }
        }
    }

    @Test("every n_ document is refused with a position", arguments: SharedData.jsonTestFiles("n_"))
    func refuses(file: String) throws {
        let bytes = try SharedData.bytes(file)
        let error = #expect(throws: JSONParseError.self, "\(file)") { try JSONParser.parse(bytes) }
        #expect((error?.line ?? 0) >= 1)
        #expect((error?.offset ?? -1) <= bytes.count)
    }

    @Test("every i_ document gets an answer, and an accepted one round-trips", arguments: SharedData.jsonTestFiles("i_"))
    func implementationDefined(file: String) throws {
        let bytes = try SharedData.bytes(file)
        if let value = try? JSONParser.parse(bytes) {
            #expect(try JSONParser.parse(value.serialized()) == value)
        }
    }

    @Test("the suite is all there: 95 y_, 188 n_, 35 i_")
    func suiteIsComplete() {
        #expect(SharedData.jsonTestFiles("y_").count == 95)
        #expect(SharedData.jsonTestFiles("n_").count == 188)
        #expect(SharedData.jsonTestFiles("i_").count == 35)
    }
}
