import CCurl

/// Facts about the libcurl this process runs with, read once at start.
public struct CurlLibraryInfo: Sendable, CustomStringConvertible {
    /// libcurl's version, for example `7.88.1`.
    public let version: String
    /// The TLS backend libcurl was built with, for example `OpenSSL/3.0.19`.
    public let tlsBackend: String
    /// Whether libcurl can speak HTTP/2 (needs nghttp2).
    public let supportsHTTP2: Bool
    /// The content codings libcurl decodes, in the order it offers them: `gzip`/`deflate`,
    /// `br` and `zstd` as built in.
    public let contentEncodings: [String]

    public var description: String {
        "libcurl/\(version) \(tlsBackend)\(supportsHTTP2 ? " HTTP/2" : "") encodings=\(contentEncodings.joined(separator: ","))"
    }
}

/// The process-wide libcurl set-up: `curl_global_init` exactly once, before any handle exists,
/// and the check that the runtime libcurl is new enough.
enum CurlLibrary {
    /// The oldest libcurl fleetset supports: 7.85.0 is the first release with every option the
    /// client sets (`CURLOPT_PROTOCOLS_STR` is the newest of them). CI tests Debian 12's 7.88.1.
    static let minimumVersion: (major: UInt32, minor: UInt32, patch: UInt32) = (7, 85, 0)

    /// The outcome of the one-time initialization. Swift runs a global's initializer exactly once,
    /// thread-safely, which is what `curl_global_init` requires.
    private static let initialization: Result<CurlLibraryInfo, HTTPClientError> = initializeOnce()

    /// Initializes libcurl on first use and returns what it offers.
    ///
    /// - Throws: ``HTTPClientError`` when the runtime libcurl is older than ``minimumVersion``,
    ///   lacks TLS, or `curl_global_init` fails.
    static func ensureInitialized() throws(HTTPClientError) -> CurlLibraryInfo {
        try initialization.get()
    }

    /// Why a libcurl of `versionNumber` (libcurl's `0xXXYYZZ` encoding) cannot be used, or `nil`.
    static func versionProblem(versionNumber: UInt32, version: String) -> String? {
        let minimum = (minimumVersion.major << 16) | (minimumVersion.minor << 8) | minimumVersion.patch
        guard versionNumber < minimum else { return nil }
        let wanted = "\(minimumVersion.major).\(minimumVersion.minor).\(minimumVersion.patch)"
        return "libcurl \(version) is too old: fleetset needs libcurl \(wanted) or newer (Debian 12 ships 7.88.1)"
    }

    private static func initializeOnce() -> Result<CurlLibraryInfo, HTTPClientError> {
        // Check the version before curl_global_init so an unsupported libcurl is never used.
        // CURLVERSION_NOW is a macro Swift cannot import; every field read here exists in TENTH.
        guard let data = curl_version_info(CURLVERSION_TENTH)?.pointee else {
            return .failure(.libraryUnusable("curl_version_info returned nothing"))
        }
        let version = String(cString: data.version)
        if let problem = versionProblem(versionNumber: data.version_num, version: version) {
            return .failure(.libraryUnusable(problem))
        }
        guard let ssl = data.ssl_version else {
            return .failure(.libraryUnusable("libcurl \(version) was built without TLS support; fleetset only speaks HTTPS"))
        }
        let code = curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        guard code == CURLE_OK else {
            return .failure(
                HTTPClientError(
                    kind: .libraryUnusable, message: "libcurl failed to initialize",
                    curlCode: Int(code.rawValue), call: "curl_global_init",
                    curlMessage: String(cString: curl_easy_strerror(code))))
        }
        let features = data.features
        var encodings: [String] = []
        if features & CURL_VERSION_LIBZ != 0 { encodings += ["gzip", "deflate"] }
        if features & CURL_VERSION_BROTLI != 0 { encodings.append("br") }
        if features & CURL_VERSION_ZSTD != 0 { encodings.append("zstd") }
        return .success(
            CurlLibraryInfo(
                version: version,
                tlsBackend: String(cString: ssl),
                supportsHTTP2: features & CURL_VERSION_HTTP2 != 0,
                contentEncodings: encodings))
    }
}
