package shard

// AckAnnotation exposes ackAnnotation to the protocol tests, which play a
// member of the server-side mode by hand.
const AckAnnotation = ackAnnotation
