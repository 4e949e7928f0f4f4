package client

import "context"

// StatusClient writes the status subresource. Get one from Client.Status.
type StatusClient struct {
	c *Client
}

// Status returns the client of the status subresource: its writes change
// only an object's status, and they are the only way to change it for
// types with a status subresource.
func (c *Client) Status() StatusClient { return StatusClient{c: c} }

// Update replaces obj's status and sets obj to the object stored. It fails
// with a conflict unless obj's resourceVersion is the latest.
func (s StatusClient) Update(ctx context.Context, obj Object) error {
	return s.c.update(ctx, obj, "status")
}

// Patch patches obj's status with patch and sets obj to the object stored.
func (s StatusClient) Patch(ctx context.Context, obj Object, patch Patch) error {
	return s.c.patch(ctx, obj, patch, "status")
}

// Apply applies ac's status by server-side apply, as Client.Apply does for
// the object. Only ac's status is written. The API server records
// ownership per subresource, so applying an object and its status under
// one field manager does not make either remove the other's fields.
func (s StatusClient) Apply(ctx context.Context, ac ApplyConfiguration) error {
	return s.c.apply(ctx, ac, "status")
}
