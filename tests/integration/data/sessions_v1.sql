-- A session database as the SQLite store before the SQL backend wrote it (schema version 1):
-- two sessions, operator state, a completed tick, a run lease and two managed agents,
-- dumped with sqlite3's .dump. Read by tests/integration/test_sqlite_session_store.py.
PRAGMA user_version = 1;
BEGIN TRANSACTION;
CREATE TABLE leases (
        name       TEXT PRIMARY KEY,
        holder     TEXT NOT NULL,
        expires_us INTEGER NOT NULL
    );
INSERT INTO "leases" VALUES('tick:news:00000000000000000100','host-a',9223372036854775807);
INSERT INTO "leases" VALUES('run:x','host-a',1796179911618904);
CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq        INTEGER NOT NULL,
        role       TEXT NOT NULL,
        created_us INTEGER NOT NULL,
        record     TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
INSERT INTO "messages" VALUES('first',0,'user',1796176311538615,'{"role":"user","content":"Where is Paris?","at":1796176311538615}');
INSERT INTO "messages" VALUES('first',1,'assistant',1796176311538678,'{"role":"assistant","content":"In France.","at":1796176311538678}');
INSERT INTO "messages" VALUES('second',0,'user',1796176311617943,'{"role":"user","content":"Hello","at":1796176311617943}');
INSERT INTO "messages" VALUES('first',2,'user',1796176311618230,'{"role":"user","content":"And Rome?","at":1796176311618230}');
INSERT INTO "messages" VALUES('first',3,'assistant',1796176311618231,'{"role":"assistant","content":"In Italy.","at":1796176311618231}');
CREATE TABLE operator_state (
        key        TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        updated_us INTEGER NOT NULL
    );
INSERT INTO "operator_state" VALUES('operator:news:state','{"seen":[1,2]}',1796176311618463);
INSERT INTO "operator_state" VALUES('managed_agent:geo','{"id":"geo","name":"","agent":"simple","model":null,"system_prompt":"Geography.","tools":[],"persona":null,"temperature":null,"max_tokens":null,"max_turns":null,"agent_options":{},"created_us":1000,"updated_us":1000}',1796176311619025);
INSERT INTO "operator_state" VALUES('managed_agent:alpha','{"id":"alpha","name":"","agent":"simple","model":null,"system_prompt":null,"tools":[],"persona":null,"temperature":null,"max_tokens":null,"max_turns":null,"agent_options":{},"created_us":2000,"updated_us":2000}',1796176311619118);
CREATE TABLE sessions (
        touched       INTEGER PRIMARY KEY,
        id            TEXT NOT NULL UNIQUE,
        created_us    INTEGER NOT NULL,
        updated_us    INTEGER NOT NULL,
        message_count INTEGER NOT NULL,
        title         TEXT NOT NULL DEFAULT ''
    );
INSERT INTO "sessions" VALUES(2,'second',1796176311618124,1796176311618124,1,'Hello');
INSERT INTO "sessions" VALUES(3,'first',1796176311617273,1796176311618285,4,'Where is Paris?');
COMMIT;
