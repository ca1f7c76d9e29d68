-- Tables Hive Metastore 2.3's TxnHandler uses for table locks.
-- Iceberg's HiveCatalog takes such a lock around every commit; DataNucleus'
-- autoCreateAll does not create them because HMS reaches them by plain JDBC.
-- Written for PostgreSQL; unquoted names fold to lower case as HMS's queries do.
CREATE TABLE IF NOT EXISTS next_lock_id (nl_next BIGINT NOT NULL);
INSERT INTO next_lock_id SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM next_lock_id);

CREATE TABLE IF NOT EXISTS hive_locks (
  hl_lock_ext_id BIGINT NOT NULL,
  hl_lock_int_id BIGINT NOT NULL,
  hl_txnid BIGINT,
  hl_db VARCHAR(128) NOT NULL,
  hl_table VARCHAR(128),
  hl_partition VARCHAR(767),
  hl_lock_state CHAR(1) NOT NULL,
  hl_lock_type CHAR(1) NOT NULL,
  hl_last_heartbeat BIGINT NOT NULL,
  hl_acquired_at BIGINT,
  hl_user VARCHAR(128) NOT NULL,
  hl_host VARCHAR(128) NOT NULL,
  hl_heartbeat_count INTEGER,
  hl_agent_info VARCHAR(128),
  hl_blockedby_ext_id BIGINT,
  hl_blockedby_int_id BIGINT,
  PRIMARY KEY (hl_lock_ext_id, hl_lock_int_id)
);
CREATE INDEX IF NOT EXISTS hl_txnid_index ON hive_locks (hl_txnid);

CREATE TABLE IF NOT EXISTS aux_table (
  mt_key1 VARCHAR(128) NOT NULL,
  mt_key2 BIGINT NOT NULL,
  mt_comment VARCHAR(255),
  PRIMARY KEY (mt_key1, mt_key2)
);

CREATE TABLE IF NOT EXISTS next_txn_id (ntxn_next BIGINT NOT NULL);
INSERT INTO next_txn_id SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM next_txn_id);

CREATE TABLE IF NOT EXISTS txns (
  txn_id BIGINT PRIMARY KEY,
  txn_state CHAR(1) NOT NULL,
  txn_started BIGINT NOT NULL,
  txn_last_heartbeat BIGINT NOT NULL,
  txn_user VARCHAR(128) NOT NULL,
  txn_host VARCHAR(128) NOT NULL,
  txn_agent_info VARCHAR(128),
  txn_meta_info VARCHAR(128),
  txn_heartbeat_count INTEGER
);

CREATE TABLE IF NOT EXISTS txn_components (
  tc_txnid BIGINT,
  tc_database VARCHAR(128) NOT NULL,
  tc_table VARCHAR(128),
  tc_partition VARCHAR(767),
  tc_operation_type CHAR(1) NOT NULL
);

CREATE TABLE IF NOT EXISTS completed_txn_components (
  ctc_txnid BIGINT,
  ctc_database VARCHAR(128) NOT NULL,
  ctc_table VARCHAR(256),
  ctc_partition VARCHAR(767)
);

CREATE TABLE IF NOT EXISTS write_set (
  ws_database VARCHAR(128) NOT NULL,
  ws_table VARCHAR(128) NOT NULL,
  ws_partition VARCHAR(767),
  ws_txnid BIGINT NOT NULL,
  ws_commit_id BIGINT NOT NULL,
  ws_operation_type CHAR(1) NOT NULL
);
