import Curl
import FleetTestSupport
import Foundation
import Testing

/// `fleetset-server serve` as a process: its options as a person gives them.
@Suite("fleetset-server serve, the command")
struct ServeCommandTests {
    @Test("--silent-after and --gauge-interval outside their ranges are refused, naming the option and the range")
    func gaugeOptions() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let base = ["serve", "--database", directory + "/fleet.sqlite", "--admin-token-file", directory + "/admin.token"]
        for (option, value, message) in [
            ("--silent-after", "59", "--silent-after must be a number of seconds from 60 to 2592000"),
            ("--silent-after", "2592001", "--silent-after must be a number of seconds from 60 to 2592000"),
            ("--gauge-interval", "0.5", "--gauge-interval must be a number of seconds from 1 to 3600, or 0 for never"),
            ("--gauge-interval", "3601", "--gauge-interval must be a number of seconds from 1 to 3600, or 0 for never"),
        ] {
            let refused = try await CLIRunner.run(base + [option, value], executable: CLIRunner.product("fleetset-server"))
            #expect(refused.status == 64 && refused.standardError.contains(message), "\(option) \(value): \(refused)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/fleet.sqlite"), "a refused serve made its database")
    }

    @Test("--history-keep keep-all: the server serves until SIGTERM (the history pruner, with nothing to do, does not end it)")
    func keepAll() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess.start(in: directory, extraArguments: ["--history-keep", "keep-all", "--password-cost", "10"])
        defer { server.kill() }
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true))
        let health = try? await http.execute(HTTPClient.Request(url: server.url + "/healthz"))
        await http.shutdown()
        #expect(health?.status == 200, "\(server.log)")
        server.signal(SIGTERM)
        #expect(await server.waitForExit() == 0, "\(server.log)")
        #expect(!server.log.contains("event=fatal") && server.log.contains("event=stopped"), "\(server.log)")
    }
}
