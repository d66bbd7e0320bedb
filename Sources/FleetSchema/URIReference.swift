/// An RFC 3986 URI reference split into its five components, with reference resolution.
///
/// JSON Schema identifies schemas by URI (`$id`, `$ref`, `$schema`); this is all the URI
/// handling the validator needs. It never dereferences anything: a URI is only a key into the
/// ``SchemaRegistry``.
struct URIReference: Sendable, Hashable, CustomStringConvertible {
    var scheme: String?
    var authority: String?
    var path: String
    var query: String?
    var fragment: String?

    /// Splits `text` as RFC 3986 appendix B does. Every string is some URI reference.
    init(_ text: String) {
        var rest = Substring(text)
        if let hash = rest.firstIndex(of: "#") {
            fragment = String(rest[rest.index(after: hash)...])
            rest = rest[..<hash]
        }
        if let question = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: question)...])
            rest = rest[..<question]
        }
        if let colon = rest.firstIndex(of: ":"), colon != rest.startIndex,
            !rest[..<colon].contains(where: { $0 == "/" })
        {
            scheme = String(rest[..<colon])
            rest = rest[rest.index(after: colon)...]
        }
        if rest.hasPrefix("//") {
            let afterSlashes = rest.dropFirst(2)
            let end = afterSlashes.firstIndex(of: "/") ?? afterSlashes.endIndex
            authority = String(afterSlashes[..<end])
            rest = afterSlashes[end...]
        }
        path = String(rest)
    }

    private init(scheme: String?, authority: String?, path: String, query: String?, fragment: String?) {
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.query = query
        self.fragment = fragment
    }

    /// The reference recomposed (RFC 3986 section 5.3).
    var description: String {
        var text = ""
        if let scheme { text += scheme + ":" }
        if let authority { text += "//" + authority }
        text += path
        if let query { text += "?" + query }
        if let fragment { text += "#" + fragment }
        return text
    }

    /// The same reference without its fragment: the identifier of a whole schema resource.
    var withoutFragment: URIReference {
        var copy = self
        copy.fragment = nil
        return copy
    }

    /// `reference` resolved against this base URI (RFC 3986 section 5.2.2, strict).
    func resolving(_ reference: URIReference) -> URIReference {
        if reference.scheme != nil {
            return URIReference(
                scheme: reference.scheme, authority: reference.authority, path: Self.removingDotSegments(reference.path),
                query: reference.query, fragment: reference.fragment)
        }
        if reference.authority != nil {
            return URIReference(
                scheme: scheme, authority: reference.authority, path: Self.removingDotSegments(reference.path),
                query: reference.query, fragment: reference.fragment)
        }
        if reference.path.isEmpty {
            return URIReference(
                scheme: scheme, authority: authority, path: path, query: reference.query ?? query, fragment: reference.fragment)
        }
        let mergedPath: String
        if reference.path.hasPrefix("/") {
            mergedPath = reference.path
        } else if authority != nil && path.isEmpty {
            mergedPath = "/" + reference.path
        } else if let lastSlash = path.lastIndex(of: "/") {
            mergedPath = path[...lastSlash] + reference.path
        } else {
            mergedPath = reference.path
        }
        return URIReference(
            scheme: scheme, authority: authority, path: Self.removingDotSegments(mergedPath), query: reference.query,
            fragment: reference.fragment)
    }

    /// `text` resolved against this base URI.
    func resolving(_ text: String) -> URIReference {
        resolving(URIReference(text))
    }

    /// RFC 3986 section 5.2.4.
    static func removingDotSegments(_ path: String) -> String {
        guard path.contains(".") else { return path }
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        let isAbsolute = path.hasPrefix("/")
        for (index, segment) in segments.enumerated() {
            if index == 0 && isAbsolute { continue }
            let isLast = index == segments.count - 1
            switch segment {
            case ".":
                if isLast { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if isLast { output.append("") }
            default:
                output.append(segment)
            }
        }
        return (isAbsolute ? "/" : "") + output.joined(separator: "/")
    }
}
