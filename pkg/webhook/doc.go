// Package webhook serves admission and conversion webhooks.
package webhook
