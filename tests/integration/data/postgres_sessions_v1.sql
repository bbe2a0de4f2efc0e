-- A session database as the PostgreSQL store before the SQL backend wrote it (schema version
-- 1): the same data as sessions_v1.sql, dumped with pg_dump --inserts.
-- Read by tests/integration/test_postgres_session_store.py.

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

CREATE TABLE public.jarvis_leases (
    name text NOT NULL,
    holder text NOT NULL,
    expires_us bigint NOT NULL
);

CREATE TABLE public.jarvis_messages (
    session_id text NOT NULL,
    seq integer NOT NULL,
    role text NOT NULL,
    created_us bigint NOT NULL,
    record text NOT NULL
);

CREATE TABLE public.jarvis_operator_state (
    key text NOT NULL,
    value text NOT NULL,
    updated_us bigint NOT NULL
);

CREATE TABLE public.jarvis_schema (
    version integer NOT NULL
);

CREATE SEQUENCE public.jarvis_session_touch
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE public.jarvis_sessions (
    id text NOT NULL,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL,
    touched bigint NOT NULL,
    message_count integer NOT NULL,
    title text DEFAULT ''::text NOT NULL
);

INSERT INTO public.jarvis_leases VALUES ('tick:news:00000000000000000100', 'host-a', 9223372036854775807);
INSERT INTO public.jarvis_leases VALUES ('run:x', 'host-a', 1796180031386992);

INSERT INTO public.jarvis_messages VALUES ('first', 0, 'user', 1796176430943613, '{"role":"user","content":"Where is Paris?","at":1796176430943613}');
INSERT INTO public.jarvis_messages VALUES ('first', 1, 'assistant', 1796176430943625, '{"role":"assistant","content":"In France.","at":1796176430943625}');
INSERT INTO public.jarvis_messages VALUES ('second', 0, 'user', 1796176431239030, '{"role":"user","content":"Hello","at":1796176431239030}');
INSERT INTO public.jarvis_messages VALUES ('first', 2, 'user', 1796176431246742, '{"role":"user","content":"And Rome?","at":1796176431246742}');
INSERT INTO public.jarvis_messages VALUES ('first', 3, 'assistant', 1796176431246747, '{"role":"assistant","content":"In Italy.","at":1796176431246747}');

INSERT INTO public.jarvis_operator_state VALUES ('operator:news:state', '{"seen":[1,2]}', 1796176431294194);
INSERT INTO public.jarvis_operator_state VALUES ('managed_agent:geo', '{"id":"geo","name":"","agent":"simple","model":null,"system_prompt":"Geography.","tools":[],"persona":null,"temperature":null,"max_tokens":null,"max_turns":null,"agent_options":{},"created_us":1000,"updated_us":1000}', 1796176431403577);
INSERT INTO public.jarvis_operator_state VALUES ('managed_agent:alpha', '{"id":"alpha","name":"","agent":"simple","model":null,"system_prompt":null,"tools":[],"persona":null,"temperature":null,"max_tokens":null,"max_turns":null,"agent_options":{},"created_us":2000,"updated_us":2000}', 1796176431418979);

INSERT INTO public.jarvis_schema VALUES (1);

INSERT INTO public.jarvis_sessions VALUES ('second', 1796176431239402, 1796176431239402, 2, 1, 'Hello');
INSERT INTO public.jarvis_sessions VALUES ('first', 1796176431170716, 1796176431246928, 3, 4, 'Where is Paris?');

SELECT pg_catalog.setval('public.jarvis_session_touch', 3, true);

ALTER TABLE ONLY public.jarvis_leases
    ADD CONSTRAINT jarvis_leases_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.jarvis_messages
    ADD CONSTRAINT jarvis_messages_pkey PRIMARY KEY (session_id, seq);

ALTER TABLE ONLY public.jarvis_operator_state
    ADD CONSTRAINT jarvis_operator_state_pkey PRIMARY KEY (key);

ALTER TABLE ONLY public.jarvis_sessions
    ADD CONSTRAINT jarvis_sessions_pkey PRIMARY KEY (id);

CREATE INDEX jarvis_sessions_by_touched ON public.jarvis_sessions USING btree (touched);

ALTER TABLE ONLY public.jarvis_messages
    ADD CONSTRAINT jarvis_messages_session_id_fkey FOREIGN KEY (session_id) REFERENCES public.jarvis_sessions(id) ON DELETE CASCADE;

