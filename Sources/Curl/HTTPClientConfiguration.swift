extension HTTPClient {
    /// TLS settings. Certificate and host-name verification are always on; nothing here turns
    /// them off.
    public struct TLSConfiguration: Sendable, Equatable {
        /// A PEM file of CA certificates to trust instead of the system store. Default: `nil`
        /// (the system store).
        public var caFile: String?
        /// A PEM client certificate for mutual TLS. Default: `nil`.
        public var clientCertificateFile: String?
        /// The PEM private key of ``clientCertificateFile``. Default: `nil`.
        public var clientKeyFile: String?
        /// Public keys the server must present one of, each `sha256//<base64 of the SHA-256 of
        /// the DER SubjectPublicKeyInfo>`, checked in addition to the CA chain. Default: empty
        /// (no pinning).
        public var pinnedPublicKeys: [String]

        public init(
            caFile: String? = nil, clientCertificateFile: String? = nil, clientKeyFile: String? = nil,
            pinnedPublicKeys: [String] = []
        ) {
            self.caFile = caFile
            self.clientCertificateFile = clientCertificateFile
            self.clientKeyFile = clientKeyFile
            self.pinnedPublicKeys = pinnedPublicKeys
        }
    }

    /// Everything an ``HTTPClient`` is configured with.
    ///
    /// | property | type | default |
    /// |---|---|---|
    /// | `tls` | ``TLSConfiguration`` | system CAs, no client certificate, no pinning |
    /// | `allowInsecureHTTP` | `Bool` | `false`: only `https` URLs are accepted |
    /// | `limits` | ``TransferLimits`` | connect 10 s, total 60 s, 1 B/s over 30 s, 16 MiB |
    /// | `maxRedirects` | `Int` | 5, and only to the same scheme, host and port |
    /// | `userAgent` | `String` | `fleetset libcurl/<version>` |
    /// | `sourceAddress` | `String?` | `nil`: the one the kernel picks |
    public struct Configuration: Sendable, Equatable {
        /// TLS trust, client identity and pinning.
        public var tls: TLSConfiguration
        /// Accept plain `http://` URLs. Meant for loopback development only; off by default.
        public var allowInsecureHTTP: Bool
        /// Limits for requests that do not set their own.
        public var limits: TransferLimits
        /// How many same-origin redirects to follow; 0 returns the `3xx` response itself.
        public var maxRedirects: Int
        /// The `User-Agent` header, `nil` for `fleetset libcurl/<version>`.
        public var userAgent: String?
        /// The local IP address connections are made from (`CURLOPT_INTERFACE` `host!ADDRESS`),
        /// for a host with several; `nil`: the one the kernel picks for the route.
        public var sourceAddress: String?
        /// The longest the transfer thread waits when libcurl has nothing due: a safety net, so
        /// that a missed timer or event would hold a transfer up for at most this long (1 s).
        /// Tests lengthen it to show that nothing they do relies on it.
        @_spi(Testing) public var safetyNetWait: Duration = .seconds(1)

        public init(
            tls: TLSConfiguration = TLSConfiguration(), allowInsecureHTTP: Bool = false,
            limits: TransferLimits = TransferLimits(), maxRedirects: Int = 5, userAgent: String? = nil, sourceAddress: String? = nil
        ) {
            self.sourceAddress = sourceAddress
            self.tls = tls
            self.allowInsecureHTTP = allowInsecureHTTP
            self.limits = limits
            self.maxRedirects = maxRedirects
            self.userAgent = userAgent
        }
    }
}
