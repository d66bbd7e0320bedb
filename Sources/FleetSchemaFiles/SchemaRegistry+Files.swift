import FleetIO
import FleetJSON
import FleetSchema

extension SchemaRegistry {
    /// Registers every `.json` file under `directory` as `baseURI` + its relative path, as the
    /// official suite's `remotes` folder expects (`http://localhost:1234/`).
    ///
    /// - Throws: `FileError` when the folder or a file cannot be read; ``RemoteError`` when a
    ///   file is not JSON.
    public mutating func registerFiles(under directory: String, baseURI: String = "http://localhost:1234/") throws(RemoteError) {
        let files: [String]
        do { files = try FileSystem.regularFiles(under: directory) } catch { throw RemoteError(path: directory, reason: error.description) }
        for file in files where file.hasSuffix(".json") {
            let path = directory + "/" + file
            do {
                let document = try JSONParser.parse(try FileSystem.readFile(path), duplicateKeys: .keepLast)
                register(document, as: baseURI + file)
            } catch let error as FileError {
                throw RemoteError(path: path, reason: error.description)
            } catch {
                throw RemoteError(path: path, reason: "not JSON: \(error)")
            }
        }
    }

    /// A document under a remotes folder that could not be loaded.
    public struct RemoteError: Error, Sendable, CustomStringConvertible {
        /// The file or folder.
        public let path: String
        /// Why.
        public let reason: String

        public var description: String { reason.hasPrefix("cannot") ? reason : "\(path): \(reason)" }
    }
}
