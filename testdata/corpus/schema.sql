--
-- PostgreSQL database dump
--

-- Dumped from database version 17.2
-- Dumped by pg_dump version 17.2

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET transaction_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: billing; Type: SCHEMA; Schema: -; Owner: shop
--

CREATE SCHEMA billing;


ALTER SCHEMA billing OWNER TO shop;

--
-- Name: harbormaster; Type: SCHEMA; Schema: -; Owner: shop
--

CREATE SCHEMA harbormaster;


ALTER SCHEMA harbormaster OWNER TO shop;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: invoices; Type: TABLE; Schema: billing; Owner: shop
--

CREATE TABLE billing.invoices (
    id bigint NOT NULL,
    order_id bigint NOT NULL,
    amount_cents bigint NOT NULL,
    paid boolean DEFAULT false NOT NULL
);


ALTER TABLE billing.invoices OWNER TO shop;

--
-- Name: receipts; Type: TABLE; Schema: harbormaster; Owner: shop
--

CREATE TABLE harbormaster.receipts (
    marque_id text NOT NULL
);


ALTER TABLE harbormaster.receipts OWNER TO shop;

--
-- Name: Mixed Case; Type: TABLE; Schema: public; Owner: shop
--

CREATE TABLE public."Mixed Case" (
    id bigint NOT NULL,
    "Value" text
);


ALTER TABLE public."Mixed Case" OWNER TO shop;

--
-- Name: accounts; Type: TABLE; Schema: public; Owner: shop
--

CREATE TABLE public.accounts (
    id bigint NOT NULL,
    holder text NOT NULL,
    branch text NOT NULL,
    balance_cents bigint DEFAULT 0 NOT NULL,
    ssn text,
    notes text
);


ALTER TABLE public.accounts OWNER TO shop;

--
-- Name: audit_notes; Type: TABLE; Schema: public; Owner: shop
--

CREATE TABLE public.audit_notes (
    id bigint NOT NULL,
    order_id bigint,
    body text
);


ALTER TABLE public.audit_notes OWNER TO shop;

--
-- Name: customers; Type: TABLE; Schema: public; Owner: shop
--

CREATE TABLE public.customers (
    id bigint NOT NULL,
    name text NOT NULL,
    email text,
    region text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);


ALTER TABLE public.customers OWNER TO shop;

--
-- Name: orders; Type: TABLE; Schema: public; Owner: shop
--

CREATE TABLE public.orders (
    id bigint NOT NULL,
    customer_id bigint NOT NULL,
    status text NOT NULL,
    total_cents bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);


ALTER TABLE public.orders OWNER TO shop;

--
-- Name: secrets; Type: TABLE; Schema: public; Owner: shop
--

CREATE TABLE public.secrets (
    id bigint NOT NULL,
    token text NOT NULL
);


ALTER TABLE public.secrets OWNER TO shop;

--
-- Name: invoices invoices_pkey; Type: CONSTRAINT; Schema: billing; Owner: shop
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_pkey PRIMARY KEY (id);


--
-- Name: receipts receipts_pkey; Type: CONSTRAINT; Schema: harbormaster; Owner: shop
--

ALTER TABLE ONLY harbormaster.receipts
    ADD CONSTRAINT receipts_pkey PRIMARY KEY (marque_id);


--
-- Name: Mixed Case Mixed Case_pkey; Type: CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public."Mixed Case"
    ADD CONSTRAINT "Mixed Case_pkey" PRIMARY KEY (id);


--
-- Name: accounts accounts_pkey; Type: CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);


--
-- Name: audit_notes audit_notes_pkey; Type: CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.audit_notes
    ADD CONSTRAINT audit_notes_pkey PRIMARY KEY (id);


--
-- Name: customers customers_email_key; Type: CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_email_key UNIQUE (email);


--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (id);


--
-- Name: orders orders_pkey; Type: CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (id);


--
-- Name: secrets secrets_pkey; Type: CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.secrets
    ADD CONSTRAINT secrets_pkey PRIMARY KEY (id);


--
-- Name: orders_status_created_at_idx; Type: INDEX; Schema: public; Owner: shop
--

CREATE INDEX orders_status_created_at_idx ON public.orders USING btree (status, created_at);


--
-- Name: audit_notes audit_notes_order_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.audit_notes
    ADD CONSTRAINT audit_notes_order_id_fkey FOREIGN KEY (order_id) REFERENCES public.orders(id);


--
-- Name: invoices invoices_order_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: shop
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_order_id_fkey FOREIGN KEY (order_id) REFERENCES public.orders(id);


--
-- Name: orders orders_customer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: shop
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id);


--
-- PostgreSQL database dump complete
--

