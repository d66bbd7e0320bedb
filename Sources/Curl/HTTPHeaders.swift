extension HTTPClient {
    /// An ordered list of HTTP header fields with case-insensitive lookup by name.
    public struct Headers: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
        /// One header field as it appears on the wire.
        public struct Field: Sendable, Equatable {
            /// The field name as sent or received (HTTP/2 names arrive in lower case).
            public var name: String
            /// The field value without surrounding whitespace.
            public var value: String

            /// Whether the field is named `other`, ignoring ASCII case (header names are ASCII
            /// tokens), without allocating lower-cased copies.
            func hasName(_ other: String) -> Bool {
                name.utf8.elementsEqual(other.utf8) { a, b in a | (a &- 65 < 26 ? 0x20 : 0) == b | (b &- 65 < 26 ? 0x20 : 0) }
            }
        }

        private var fields: [Field]

        /// Creates an empty header list.
        public init() { fields = [] }

        /// Creates a header list from `(name, value)` pairs, keeping their order.
        public init(_ pairs: [(String, String)]) {
            fields = pairs.map { Field(name: $0.0, value: $0.1) }
        }

        public init(dictionaryLiteral elements: (String, String)...) {
            self.init(elements)
        }

        /// The first value of the field named `name` (case-insensitive), or `nil`.
        ///
        /// Setting a value replaces every field of that name; setting `nil` removes them.
        public subscript(name: String) -> String? {
            get { fields.first { $0.hasName(name) }?.value }
            set {
                let firstIndex = fields.firstIndex { $0.hasName(name) }
                fields.removeAll { $0.hasName(name) }
                guard let newValue else { return }
                fields.insert(Field(name: name, value: newValue), at: firstIndex ?? fields.count)
            }
        }

        /// Every value of the fields named `name` (case-insensitive), in order.
        public func values(for name: String) -> [String] {
            fields.filter { $0.hasName(name) }.map(\.value)
        }

        /// Appends a field, keeping any of the same name.
        public mutating func add(name: String, value: String) {
            fields.append(Field(name: name, value: value))
        }

        /// Removes every field.
        mutating func removeAll() { fields.removeAll() }

        /// Whether there are no fields.
        public var isEmpty: Bool { fields.isEmpty }

        public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }
    }
}
