package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations[i] takes a schema from version i to version i+1. Each statement
// is idempotent, and published migrations are never edited: a change is a new
// entry.
var migrations = [][]string{
	// 1: items and the version sequence.
	{
		`CREATE SEQUENCE IF NOT EXISTS {s}.versions AS bigint`,
		`CREATE TABLE IF NOT EXISTS {s}.items (
			key     bytea  PRIMARY KEY,
			value   bytea  NOT NULL,
			version bigint NOT NULL CHECK (version >= 0)
		)`,
		// Values are ciphertexts: compressing them wastes CPU.
		`ALTER TABLE {s}.items ALTER COLUMN value SET STORAGE EXTERNAL`,
	},
}

// schemaVersion is the version Open migrates to.
var schemaVersion = int64(len(migrations))

// migrate creates or upgrades the schema. A transaction-scoped advisory lock
// per schema name serializes concurrent openers, and every step checks before
// it creates, so a schema that is already current costs one short transaction.
func (s *Store) migrate(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
			"noydb/pgstore/"+s.schema); err != nil {
			return err
		}
		// Checked first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege
		// on the database even when the schema exists.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`,
			s.schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, s.sql(`CREATE SCHEMA {s}`)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, s.sql(`CREATE TABLE IF NOT EXISTS {s}.meta (
			name  text   PRIMARY KEY,
			value bigint NOT NULL
		)`)); err != nil {
			return err
		}
		var current int64
		err := tx.QueryRow(ctx, s.sql(`SELECT value FROM {s}.meta WHERE name = 'schema_version'`)).Scan(&current)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if current > schemaVersion {
			return fmt.Errorf("schema %q is at version %d, this pgstore knows %d: %w",
				s.schema, current, schemaVersion, ErrSchemaTooNew)
		}
		for v := current; v < schemaVersion; v++ {
			for _, stmt := range migrations[v] {
				if _, err := tx.Exec(ctx, s.sql(stmt)); err != nil {
					return fmt.Errorf("migrate schema %q to version %d: %w", s.schema, v+1, err)
				}
			}
		}
		if current == schemaVersion {
			return nil
		}
		_, err = tx.Exec(ctx, s.sql(`INSERT INTO {s}.meta (name, value) VALUES ('schema_version', $1)
			ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`), schemaVersion)
		return err
	})
}
