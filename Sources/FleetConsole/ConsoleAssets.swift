import FleetServerCore

/// The console's stylesheet and script, embedded in the binary (see the ConsoleAssets plugin).
public enum ConsoleAssets {
    /// One file the console serves.
    public struct Asset: Sendable {
        /// Its path, with a digest of its content so that a browser fetches a changed file at once
        /// and may keep it for a year.
        public let path: String
        public let contentType: String
        public let body: String

        init(name: String, contentType: String, body: String) {
            self.path = "/console/assets/\(name)?v=\(Credentials.shortDigest(body.utf8))"
            self.contentType = contentType
            self.body = body
        }
    }

    public static let stylesheet = Asset(name: "console.css", contentType: "text/css; charset=utf-8", body: ConsoleAssetTexts.stylesheet)
    public static let script = Asset(name: "console.js", contentType: "text/javascript; charset=utf-8", body: ConsoleAssetTexts.script)

    /// The asset of a file name, or `nil`.
    public static func named(_ name: String) -> Asset? {
        switch name {
        case "console.css": stylesheet
        case "console.js": script
        default: nil
        }
    }
}
