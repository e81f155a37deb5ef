-- The gate corpus's target: a consumer-lending and support-operations
-- database, as pg_dump --schema-only would write it.
CREATE TABLE public.loans (
    id bigint NOT NULL,
    customer_id bigint NOT NULL,
    status text NOT NULL,
    amount_cents bigint NOT NULL,
    apr numeric(6,3) NOT NULL,
    term_months integer NOT NULL,
    region text NOT NULL,
    product text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    risk_score integer NOT NULL,
    kyc_verified boolean NOT NULL,
    income_verified_at timestamp with time zone,
    manual_review_done boolean NOT NULL,
    customer_consent_logged boolean NOT NULL,
    advisor_note text
);

CREATE TABLE public.customers (
    id bigint NOT NULL,
    name text NOT NULL,
    email text,
    region text NOT NULL,
    age integer NOT NULL,
    vip boolean NOT NULL,
    do_not_contact boolean NOT NULL,
    complaint_open boolean NOT NULL,
    vulnerable_flag boolean NOT NULL,
    contact_attempts integer NOT NULL,
    last_contacted_at timestamp with time zone,
    notes text,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE public.tickets (
    id bigint NOT NULL,
    customer_id bigint NOT NULL,
    status text NOT NULL,
    priority integer NOT NULL,
    channel text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    sla_due_at timestamp with time zone NOT NULL,
    assignee text,
    resolution text,
    sentiment text,
    escalated boolean NOT NULL,
    agent_reason text
);

CREATE TABLE public.refunds (
    id bigint NOT NULL,
    ticket_id bigint NOT NULL,
    amount_cents bigint NOT NULL,
    status text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    customer_consent_logged boolean NOT NULL,
    reason text,
    approved_by_human boolean NOT NULL
);

CREATE TABLE public.payments (
    id bigint NOT NULL,
    loan_id bigint NOT NULL,
    amount_cents bigint NOT NULL,
    status text NOT NULL,
    due_at timestamp with time zone NOT NULL,
    paid_at timestamp with time zone,
    method text NOT NULL
);
