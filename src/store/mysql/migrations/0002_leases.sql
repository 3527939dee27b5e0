-- Leases (`-l lease`, as PostgreSQL's migration 0014): a fleet lock that lives in a row
-- rather than in a server session, so it holds no connection and fences. One row per lock
-- key while held: its holder (job, host, pid, run), an epoch that only grows (the fencing
-- token) and its expiry on the server's clock (UTC). A row whose expires_at has passed is
-- free; a released lease's row is deleted. lock_key is the lease key PostgreSQL's would have
-- (the first 8 bytes of sha256('cronguard:' [|| database || ':'] || job), signed; or
-- --lock-key). Safe to run again, as 0001.
CREATE TABLE IF NOT EXISTS {{db}}.leases (
  lock_key    BIGINT          NOT NULL PRIMARY KEY,
  job         VARCHAR(255)    NOT NULL,
  host        VARCHAR(255)    NOT NULL,
  pid         INT             NOT NULL,
  run_id      BIGINT UNSIGNED NULL,
  epoch       BIGINT UNSIGNED NOT NULL,
  ttl_ms      BIGINT          NOT NULL,
  acquired_at DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  renewed_at  DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  expires_at  DATETIME(6)     NOT NULL,
  KEY leases_job (job)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The epochs, for all keys (a key's next holder always gets a higher one, even after its
-- row went): one row, drawn with UPDATE ... SET epoch = LAST_INSERT_ID(epoch + 1) in the
-- transaction that takes the lease. Not AUTO_INCREMENT (an older server may reset it after a
-- restart to the largest id left) nor a SEQUENCE (MariaDB's; MySQL has none): a committed
-- row only grows, on both servers, and a DBA draws from it with plain SQL.
CREATE TABLE IF NOT EXISTS {{db}}.lease_epochs (
  id    TINYINT         NOT NULL PRIMARY KEY,
  epoch BIGINT UNSIGNED NOT NULL,
  CONSTRAINT lease_epochs_one CHECK (id = 1)
) ENGINE = InnoDB;

INSERT IGNORE INTO {{db}}.lease_epochs (id, epoch) VALUES (1, 0);
