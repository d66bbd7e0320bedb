import ArgumentParser
import FleetIO
import FleetJSON

/// Reading the files a command is given, with errors that name the file.
enum Inputs {
    /// The JSON document in `path`. An unreadable file exits with 2; text that is not JSON is
    /// invalid input and exits with 1.
    static func json(_ path: String, duplicateKeys: JSONParser.DuplicateKeyPolicy = .reject) throws -> JSONValue {
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.readFile(path)
        } catch {
            StandardError.write("fleetset: \(error)")
            throw CLIExit.usageOrIO
        }
        do {
            return try JSONParser.parse(bytes, duplicateKeys: duplicateKeys)
        } catch {
            print("\(path): \(error)")
            throw CLIExit.invalidInput
        }
    }
}
