import ArgumentParser
import Curl
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol

/// `fleetset explain [--app ID] [--json]`.
struct ExplainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Ask the server which scope (fleet, group, this device) set each of this device's values.",
        discussion: """
            Uses the device's identity (identity.json, readable only by the agent's user or root) \
            and the server, CA and client certificate of the agent's configuration. Secrets are \
            masked by the server. Exit status: 0 shown; 1 the server refused; 2 usage, an \
            unreadable identity or an unreachable server.
            """)

    @OptionGroup var device: DeviceOptions

    @Flag(help: "Print the server's JSON.")
    var json = false

    func run() async throws {
        let configuration = try device.configuration()
        let app = try device.selectedApp(in: configuration)
        let identity: DeviceIdentity
        do {
            guard let found = try DeviceIdentity.load(configuration.layout.identityFile) else {
                StandardError.write("fleetset explain: this device has not enrolled yet (no \(configuration.layout.identityFile))")
                throw CLIExit.usageOrIO
            }
            identity = found
        } catch let error as IdentityFileError {
            StandardError.write("fleetset explain: \(error) (run as root or the agent's user)")
            throw CLIExit.usageOrIO
        }
        let http = HTTPClient.Configuration(
            tls: .init(
                caFile: configuration.caFile, clientCertificateFile: configuration.clientCertificate, clientKeyFile: configuration.clientKey
            ),
            allowInsecureHTTP: configuration.allowInsecureHTTP, userAgent: "fleetset")
        let explanation: Explanation
        do {
            explanation = try await withHTTPClient(configuration: http) { client in
                try await FleetClient(http: client, baseURL: configuration.server, token: identity.deviceToken).explainSelf(app: app.id)
            }
        } catch {
            throw CLIExit.reportingServerFailure(error, as: "fleetset explain")
        }
        print(json ? TerminalText.serialized(explanation.json, .pretty) : explanation.table)
    }
}
