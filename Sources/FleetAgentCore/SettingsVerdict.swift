import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetSchema

/// What the agent does with a settings document the server sent, decided from the document and
/// the metadata alone (no I/O), so every path is tested without a server.
public enum SettingsVerdict: Sendable, Equatable {
    /// Valid: persist it, run the hook, report `applied`.
    case apply
    /// Keep the last good settings and report this state (`error` or `unsupported`) with this
    /// message. The file is not touched.
    case refuse(StatusReport.State, String)
    /// The document names a schema version other than the metadata at hand (`version`): fetch
    /// the metadata again (it changed while the document was on its way) and decide again.
    case needsMetadata(version: Int64)

    /// The verdict on `document` for `app`, given the metadata of its schema version as read
    /// (or why it could not be read).
    public static func evaluate(_ document: SettingsDocument, app: String, metadata: Result<Metadata, MetadataError>) -> SettingsVerdict {
        guard document.app == app else {
            return .refuse(.error, "the server sent settings of app \"\(document.app)\" for \"\(app)\"")
        }
        let found: Metadata
        switch metadata {
        case .failure(let problems):
            let state: StatusReport.State = problems.isUnsupported ? .unsupported : .error
            let what = problems.isUnsupported ? "asks for what this agent cannot honour" : "is not valid metadata"
            return .refuse(state, message("metadata version \(document.schemaVersion) \(what)", problems.problems.map(\.description)))
        case .success(let metadata):
            found = metadata
        }
        guard Int64(found.version) == document.schemaVersion else { return .needsMetadata(version: Int64(found.version)) }
        let errors = found.validate(values: .object(document.values))
        guard errors.isEmpty else {
            return .refuse(
                .error,
                message("revision \(document.revision) is not valid for metadata version \(found.version)", errors.map(\.description)))
        }
        return .apply
    }

    /// `summary: first; second; …`, cut to fit a status report.
    public static func message(_ summary: String, _ reasons: [String]) -> String {
        var text = summary
        for (index, reason) in reasons.enumerated() {
            let next = (index == 0 ? ": " : "; ") + reason
            let suffix = " … and \(reasons.count - index) more"
            if (text + next).unicodeScalars.count + suffix.unicodeScalars.count > StatusReport.maximumMessageLength {
                return text + suffix
            }
            text += next
        }
        return text
    }
}
