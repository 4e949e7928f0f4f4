package manager

// NewWithClients exposes newWithClients to the black-box tests, so they can
// run a Manager over fake clients without an API server.
var NewWithClients = newWithClients
