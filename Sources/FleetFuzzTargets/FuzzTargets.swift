import ECMARegex
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetSchema

/// What the fuzz harnesses drive: one function per target, each taking arbitrary bytes. A target
/// must never crash, hang or grow without bound, whatever the bytes; where it can, it also checks
/// a property (a document the reader accepts reads back the same after writing) and stops the
/// process when it fails, so that the fuzzer reports it.
///
/// `FuzzReplayTests` runs the committed corpora (`Fuzz/corpus/<target>/`) through them as
/// ordinary tests; the libFuzzer harnesses that drive them are the next step (issue 13, item 11).
public enum FuzzTargets {
    /// Every target by name: the name of its corpus folder and of its harness.
    public static let all: [(name: String, run: @Sendable ([UInt8]) -> Void)] = [
        ("json", json), ("schema", schema), ("regex", regex), ("protocol", protocolReaders), ("inbox", inboxRequest),
        ("config", agentConfiguration),
    ]

    /// The strict JSON reader; a document it accepts must read back equal after writing.
    public static func json(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes) else { return }
        let written = value.serialized()
        guard let again = try? JSONParser.parse(Array(written.utf8)), again == value else {
            fatalError("a document does not read back as itself after writing: \(written.prefix(200))")
        }
    }

    /// Compiling the bytes as a schema (and as metadata), then validating the document itself
    /// and a few fixed instances against it, with secret locations and masking.
    public static func schema(_ bytes: [UInt8]) {
        guard let document = try? JSONParser.parse(bytes) else { return }
        _ = try? Metadata(document)
        for options in [JSONSchema.Options.standard, .strict] {
            guard let compiled = try? JSONSchema(document, options: options) else { continue }
            for instance in [document, .null, 0, "a", ["a": 1], [1, "b"]] {
                let errors = compiled.validate(instance)
                if compiled.isValid(instance) != errors.isEmpty {
                    fatalError("isValid and validate disagree on an instance")
                }
                _ = compiled.maskingSecrets(in: instance, with: "********")
            }
        }
    }

    /// The first line is a pattern, the rest a text: compile, then match within a budget.
    public static func regex(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        guard let pattern = try? ECMAScriptPattern(String(parts[0])) else { return }
        var budget = MatchBudget(steps: 200_000)
        _ = pattern.matches(parts.count > 1 ? String(parts[1]) : "", budget: &budget)
    }

    /// Every wire message reader of protocol v1 on the same JSON.
    public static func protocolReaders(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes) else { return }
        _ = try? SettingsDocument(json: value)
        _ = try? StatusReport(json: value)
        _ = try? EnrollRequest(json: value)
        _ = try? EnrollResponse(json: value)
        _ = try? TokenRotation(json: value)
        _ = try? ErrorBody(json: value)
        _ = try? EnrollmentTokenRequest(json: value)
        _ = try? EnrollmentTokenResponse(json: value)
        _ = try? MetadataPutResult(json: value)
        _ = try? ScopedValues(json: value)
        _ = try? DeviceList(json: value)
        _ = try? Explanation(json: value)
        _ = try? DeviceRecordList(json: value)
        _ = try? DeviceUpdate(json: value)
        _ = try? EnrollmentTokenList(json: value)
        _ = RevisionTag.revision(String(decoding: bytes.prefix(64), as: UTF8.self))
    }

    /// The inbox's request parser, as the agent reads a request file.
    public static func inboxRequest(_ bytes: [UInt8]) {
        guard bytes.count <= InboxRequest.maximumFileSize, let value = try? JSONParser.parse(bytes) else { return }
        _ = try? InboxRequest(json: value)
    }

    /// The agent's configuration reader.
    public static func agentConfiguration(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes) else { return }
        _ = try? AgentConfiguration(json: value)
    }
}
