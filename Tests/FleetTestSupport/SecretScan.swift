/// Whether a secret value appears in a text as itself, not as a run of characters inside a
/// longer word: a test's secret `4711` is leaked by `pin=4711` or `"4711"`, not by the audit
/// hash `…eab94711891d…` that happens to hold its digits.
///
/// A test that asks "did the secret leak?" of a log full of hashes and random ids would
/// otherwise fail now and then for no fault of the code (one audit hash in a few hundred holds
/// any given four hex digits).
public func mentions(_ text: String, secret: String) -> Bool {
    precondition(!secret.isEmpty, "a secret to look for")
    let isWordCharacter: (Character?) -> Bool = { $0.map { $0.isASCII && ($0.isLetter || $0.isNumber) } ?? false }
    var searchStart = text.startIndex
    while let found = text[searchStart...].firstRange(of: secret) {
        let before = found.lowerBound == text.startIndex ? nil : text[text.index(before: found.lowerBound)]
        let after = found.upperBound == text.endIndex ? nil : text[found.upperBound]
        if !isWordCharacter(before) && !isWordCharacter(after) { return true }
        searchStart = text.index(after: found.lowerBound)
    }
    return false
}
