/// Checks on a server's base URL that the agent and the CLI share.
public enum ServerURL {
    /// Whether `url` is plain HTTP to this machine (`127.0.0.0/8`, `[::1]`, `localhost`): the
    /// only plain-HTTP server fleetset talks to, and then only when allowed (loopback development).
    public static func isLoopbackHTTP(_ url: String) -> Bool {
        guard url.hasPrefix("http://") else { return false }
        let authority = url.dropFirst("http://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.contains("@") else { return false }
        let host: Substring
        if authority.hasPrefix("[") {
            host = authority.dropFirst().prefix { $0 != "]" }
        } else {
            host = authority.prefix { $0 != ":" }
        }
        return host == "localhost" || host == "::1" || isIPv4Loopback(host)
    }

    /// Whether `url` starts with `https://` or `http://` and names a host.
    public static func hasHTTPScheme(_ url: String) -> Bool {
        for scheme in ["https://", "http://"] where url.hasPrefix(scheme) {
            return url.count > scheme.count && url.dropFirst(scheme.count).first != "/"
        }
        return false
    }

    private static func isIPv4Loopback(_ host: Substring) -> Bool {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && UInt8(part) != nil }
    }
}
