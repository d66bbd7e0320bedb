import Foundation

/// A throw-away certificate authority with a server and a client certificate, made with the
/// `openssl` command in a fresh temporary directory when the tests start, plus an unrelated CA
/// for the "wrong CA" cases. Nothing here is committed; nothing outlives the test process's
/// temporary directory.
struct TestPKI: Sendable {
    let directory: URL
    /// The CA that signed the server and client certificates.
    let caFile: String
    /// A second CA that signed nothing the servers present.
    let otherCAFile: String
    /// Server certificate for `IP:127.0.0.1` only (so `localhost` does not match it).
    let serverCertificateFile: String
    let serverKeyFile: String
    /// Client certificate for mutual TLS, signed by ``caFile``.
    let clientCertificateFile: String
    let clientKeyFile: String
    /// `sha256//…` pin of the server's public key.
    let serverKeyPin: String

    static func make() throws -> TestPKI {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-pki-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = """
            set -eu
            key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
            key ca.key; key other-ca.key; key server.key; key client.key
            openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj "/CN=fleetset test CA"
            openssl req -x509 -new -key other-ca.key -out other-ca.pem -days 2 -subj "/CN=unrelated test CA"
            printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > server.ext
            printf 'extendedKeyUsage=clientAuth\\n' > client.ext
            openssl req -new -key server.key -subj "/CN=127.0.0.1" -out server.csr
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.pem 2>/dev/null
            openssl req -new -key client.key -subj "/CN=test-device" -out client.csr
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext -out client.pem 2>/dev/null
            openssl pkey -in server.key -pubout -outform DER | openssl dgst -sha256 -binary | base64 > server.pin
            """
        try run("/bin/sh", ["-c", script], in: directory)
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        let pin = try String(contentsOfFile: path("server.pin"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return TestPKI(
            directory: directory, caFile: path("ca.pem"), otherCAFile: path("other-ca.pem"),
            serverCertificateFile: path("server.pem"), serverKeyFile: path("server.key"),
            clientCertificateFile: path("client.pem"), clientKeyFile: path("client.key"),
            serverKeyPin: "sha256//\(pin)")
    }
}

struct CommandFailed: Error, CustomStringConvertible {
    let command: String
    let status: Int32
    let output: String
    var description: String { "\(command) exited with \(status): \(output)" }
}

/// Runs a command to completion and returns its standard output; throws with its standard
/// error when it fails.
@discardableResult
func run(_ executable: String, _ arguments: [String], in directory: URL? = nil, input: Data? = nil) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    let output = Pipe()
    let errors = Pipe()
    let stdin = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw CommandFailed(
            command: ([executable] + arguments).joined(separator: " "), status: process.terminationStatus, output: errorText)
    }
    return data
}
