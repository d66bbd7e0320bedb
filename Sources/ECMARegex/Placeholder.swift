// TEMPORARY placeholder until the real translator lands.
public struct ECMAScriptPatternError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case invalid, unsupported }
    public let kind: Kind
    public let message: String
    public let offset: Int
    public var description: String { message }
}
public struct ECMAScriptPattern: @unchecked Sendable {
    public let source: String
    let regex: Regex<AnyRegexOutput>
    public init(_ source: String) throws(ECMAScriptPatternError) {
        self.source = source
        do { regex = try Regex(source).matchingSemantics(.unicodeScalar) } catch {
            throw ECMAScriptPatternError(kind: .invalid, message: "\(error)", offset: 0)
        }
    }
    public func matches(_ text: String) -> Bool { (try? regex.firstMatch(in: text)) != nil }
}
