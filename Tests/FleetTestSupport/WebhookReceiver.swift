import Foundation

/// A webhook receiver on 127.0.0.1 (`Tests/Webhooks/receiver.py`): it verifies each message
/// with the Standard Webhooks reference library and records it. It answers `failStatus` to the
/// first `failures` requests and 204 after; with `hang`, it never answers.
public final class WebhookReceiver: Sendable {
    /// One request it got.
    public struct Record: Sendable, Hashable {
        public let id: String
        public let timestamp: String
        public let signature: String
        public let body: String
        /// Whether `standardwebhooks` verified it with the secret in effect then.
        public let verified: Bool
        /// The status it answered.
        public let answered: Int
        public let contentType: String
    }

    public let port: Int
    public let directory: String
    private let process: RunningProcess

    /// `http://127.0.0.1:<port>/hook`.
    public var url: String { "http://127.0.0.1:\(port)/hook" }

    /// Whether the receiver can run here (the Python tools with standardwebhooks).
    public static var present: Bool { TestTools.present(TestTools.python) }

    /// Starts one on `port` (0: any free port).
    public static func start(failures: Int = 0, failStatus: Int = 500, hang: Bool = false, port requested: Int = 0) async throws
        -> WebhookReceiver
    {
        let directory = try CLIRunner.temporaryDirectory().path
        var arguments = [
            TestTools.repository + "/Tests/Webhooks/receiver.py", directory + "/port", directory + "/log", directory + "/secret", "--fail",
            String(failures), "--status", String(failStatus), "--port", String(requested),
        ]
        if hang { arguments.append("--hang") }
        let process = try RunningProcess(TestTools.python, arguments)
        var port: Int?
        try await Waiting.until(timeout: .seconds(30), "the webhook receiver to listen:\n\(process.log)") {
            port = (try? String(contentsOfFile: directory + "/port", encoding: .utf8)).flatMap { Int($0) }
            return port != nil
        }
        return WebhookReceiver(port: port!, directory: directory, process: process)
    }

    private init(port: Int, directory: String, process: RunningProcess) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// The secret (`whsec_…`) the receiver verifies with from now on.
    public func trust(_ secret: String) throws {
        try Data(secret.utf8).write(to: URL(fileURLWithPath: directory + "/secret"), options: .atomic)
    }

    /// Every request so far, in order.
    public var records: [Record] {
        guard let text = try? String(contentsOfFile: directory + "/log", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return Record(
                id: object["webhook-id"] as? String ?? "", timestamp: object["webhook-timestamp"] as? String ?? "",
                signature: object["webhook-signature"] as? String ?? "", body: object["body"] as? String ?? "",
                verified: object["verified"] as? Bool ?? false, answered: object["answered"] as? Int ?? 0,
                contentType: object["contentType"] as? String ?? "")
        }
    }

    /// Waits until the receiver has `count` requests (at most `timeout`).
    public func waitForRecords(_ count: Int, timeout: Duration = .seconds(60)) async throws {
        try await Waiting.until(timeout: timeout, "\(count) webhook requests; got \(records.count)") { self.records.count >= count }
    }

    /// Stops it and removes its folder.
    public func stop() {
        process.kill()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
