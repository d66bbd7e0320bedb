import ChildProcess
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// The OpenAPI document is the contract: it must be a valid OpenAPI 3.1 document, and the
/// running server must answer everything schemathesis generates from it as the document says.
///
/// The Python tools live in `.build/python-tools` (made by `scripts/python-tools`, which the
/// README's test command runs). Without them the tests are skipped with a message — unless
/// `FLEETSET_REQUIRE_PYTHON_TOOLS` is set, as `scripts/test` does, and then they fail.
@Suite("OpenAPI contract")
struct ContractTests {
    static let root = TestTools.repository
    static let tools = TestTools.pythonBin
    static let document = root + "/openapi/fleetset-v1.yaml"
    static let toolsPresent = TestTools.present(tools + "/st")
    static let toolsRequired = TestTools.required

    @Test("the Python tools are there when the test command requires them")
    func toolsInstalled() {
        if !Self.toolsPresent && !Self.toolsRequired {
            print("ContractTests: skipped — run scripts/python-tools to install openapi-spec-validator and schemathesis")
        }
        #expect(Self.toolsPresent || !Self.toolsRequired, "FLEETSET_REQUIRE_PYTHON_TOOLS is set but \(Self.tools)/st is missing")
    }

    @Test("every error code the server sends (ErrorCode.all) is in the document, and every code it lists is one of them")
    func errorCodes() throws {
        let text = try String(contentsOfFile: Self.document, encoding: .utf8)
        // The codes are written `like-this` in the responses' descriptions.
        let listed = Set(
            text.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
                .filter { $0.wholeMatch(of: /[a-z]+(-[a-z]+)+/) != nil && !$0.hasPrefix("x-") })
        let known = Set(ErrorCode.all.map(\.rawValue))
        let missing = known.filter { !text.contains("`\($0)`") }.sorted()
        #expect(missing.isEmpty, "codes the document does not list: \(missing)")
        #expect(
            listed.subtracting(known).isEmpty, "codes the document lists that ErrorCode does not: \(listed.subtracting(known).sorted())")
        #expect(Set(ErrorCode.console).isDisjoint(with: ErrorCode.all), "a code is the console's or protocol v1's")
    }

    @Test("openapi/fleetset-v1.yaml is a valid OpenAPI 3.1 document", .enabled(if: toolsPresent))
    func documentIsValid() async throws {
        let result = try await Self.run(Self.tools + "/openapi-spec-validator", [Self.document])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("OK"))
    }

    @Test("schemathesis finds no failures against the running server", .enabled(if: toolsPresent))
    func schemathesis() async throws {
        // The fuzzing sends hundreds of requests without or with bad tokens: limits off here
        // (RequestLimitTests covers them).
        try await TestFleetServer.with(limits: .unreachable) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice(groups: ["lobby"])
            let scratch = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let environment = [
                "FLEETSET_DEVICE_TOKEN": device.token, "FLEETSET_ADMIN_TOKEN": TestFleetServer.adminToken, "FLEETSET_APP": "kiosk",
                "FLEETSET_DEVICE_ID": device.id, "HYPOTHESIS_STORAGE_DIRECTORY": scratch + "/hypothesis", "NO_PROXY": "127.0.0.1",
            ]
            let result = try await Self.run(
                Self.tools + "/st",
                [
                    "--config-file", Self.root + "/openapi/schemathesis.toml", "run", Self.document, "--url", server.baseURL, "--no-color",
                    "--seed", "1",
                ], environment: environment, directory: scratch)
            #expect(result.status == 0, "schemathesis failed:\n\(result.output.suffix(6000))")
            #expect(result.output.contains("No issues found") || result.output.contains("passed"), "\(result.output.suffix(2000))")
        }
    }

    /// Runs a program to its end on a thread of its own (the Swift concurrency pool, which the
    /// in-process server needs, is never blocked); returns its exit status and its output.
    static func run(_ program: String, _ arguments: [String], environment: [String: String] = [:], directory: String? = nil) async throws
        -> (status: Int32, output: String)
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try runBlocking(program, arguments, environment: environment, directory: directory) })
            }
        }
    }

    private static func runBlocking(_ program: String, _ arguments: [String], environment: [String: String], directory: String?) throws
        -> (status: Int32, output: String)
    {
        let child = try SpawnedProcess(program, arguments, environment: environment, directory: directory, output: .standardError)
        let data = SpawnedProcess.readAll(child.standardError!)
        return (child.waitBlocking(), String(decoding: data, as: UTF8.self))
    }
}
