-- Demo data for the target "shop" (see examples/shop.sql). Deterministic,
-- apart from times relative to now(). EU names 3, 7, 12 and 16 have typos.
INSERT INTO public.customers (id, name, email, region, updated_at) VALUES
    (1, 'Ada Lovelace', 'ada.lovelace@example.com', 'EU', now() - interval '1 days'),
    (2, 'Bruno Keller', 'bruno.keller@example.com', 'EU', now() - interval '2 days'),
    (3, 'Jonh Smith', 'jonh.smith@example.com', 'EU', now() - interval '3 days'),
    (4, 'Chiara Rossi', 'chiara.rossi@example.com', 'EU', now() - interval '4 days'),
    (5, 'Dmitri Ivanov', 'dmitri.ivanov@example.com', 'EU', now() - interval '5 days'),
    (6, 'Elena Petrova', 'elena.petrova@example.com', 'EU', now() - interval '6 days'),
    (7, 'Mraia Garcia', 'mraia.garcia@example.com', 'EU', now() - interval '7 days'),
    (8, 'Finn Larsen', 'finn.larsen@example.com', 'EU', now() - interval '8 days'),
    (9, 'Greta Olsen', 'greta.olsen@example.com', 'EU', now() - interval '9 days'),
    (10, 'Hugo Martin', 'hugo.martin@example.com', 'EU', now() - interval '10 days'),
    (11, 'Ines Duarte', 'ines.duarte@example.com', 'EU', now() - interval '11 days'),
    (12, 'Anna Schmdit', 'anna.schmdit@example.com', 'EU', now() - interval '12 days'),
    (13, 'Jakub Novak', 'jakub.novak@example.com', 'EU', now() - interval '13 days'),
    (14, 'Klara Svoboda', 'klara.svoboda@example.com', 'EU', now() - interval '14 days'),
    (15, 'Lars Eriksson', 'lars.eriksson@example.com', 'EU', now() - interval '15 days'),
    (16, 'Pieter van Djik', 'pieter.van.djik@example.com', 'EU', now() - interval '16 days'),
    (17, 'Marta Kowalska', 'marta.kowalska@example.com', 'EU', now() - interval '17 days'),
    (18, 'Niamh Byrne', 'niamh.byrne@example.com', 'EU', now() - interval '18 days'),
    (19, 'Oskar Berg', 'oskar.berg@example.com', 'EU', now() - interval '19 days'),
    (20, 'Paula Costa', 'paula.costa@example.com', 'EU', now() - interval '20 days'),
    (21, 'Aaron Brooks', 'aaron.brooks@example.com', 'US', now() - interval '21 days'),
    (22, 'Bella Hayes', 'bella.hayes@example.com', 'US', now() - interval '22 days'),
    (23, 'Carter Flynn', 'carter.flynn@example.com', 'US', now() - interval '23 days'),
    (24, 'Dana Whitfield', 'dana.whitfield@example.com', 'US', now() - interval '24 days'),
    (25, 'Eli Turner', 'eli.turner@example.com', 'US', now() - interval '25 days'),
    (26, 'Faith Morgan', 'faith.morgan@example.com', 'US', now() - interval '26 days'),
    (27, 'Gavin Reyes', 'gavin.reyes@example.com', 'US', now() - interval '27 days'),
    (28, 'Hannah Cole', 'hannah.cole@example.com', 'US', now() - interval '28 days'),
    (29, 'Isaac Price', 'isaac.price@example.com', 'US', now() - interval '29 days'),
    (30, 'Jade Bennett', 'jade.bennett@example.com', 'US', now() - interval '30 days'),
    (31, 'Kyle Foster', 'kyle.foster@example.com', 'US', now() - interval '31 days'),
    (32, 'Lily Sanders', 'lily.sanders@example.com', 'US', now() - interval '32 days'),
    (33, 'Mason Gray', 'mason.gray@example.com', 'US', now() - interval '33 days'),
    (34, 'Nora Ellis', 'nora.ellis@example.com', 'US', now() - interval '34 days'),
    (35, 'Owen Hughes', 'owen.hughes@example.com', 'US', now() - interval '35 days'),
    (36, 'Piper Ward', 'piper.ward@example.com', 'US', now() - interval '36 days'),
    (37, 'Quinn Barnes', 'quinn.barnes@example.com', 'US', now() - interval '37 days'),
    (38, 'Riley Ross', 'riley.ross@example.com', 'US', now() - interval '38 days'),
    (39, 'Sadie Long', 'sadie.long@example.com', 'US', now() - interval '39 days'),
    (40, 'Tyler Reed', 'tyler.reed@example.com', 'US', now() - interval '40 days'),
    (41, 'Aiko Tanaka', 'aiko.tanaka@example.com', 'APAC', now() - interval '41 days'),
    (42, 'Bao Nguyen', 'bao.nguyen@example.com', 'APAC', now() - interval '42 days'),
    (43, 'Chen Wei', 'chen.wei@example.com', 'APAC', now() - interval '43 days'),
    (44, 'Deepa Iyer', 'deepa.iyer@example.com', 'APAC', now() - interval '44 days'),
    (45, 'Eun-ji Park', 'eunji.park@example.com', 'APAC', now() - interval '45 days'),
    (46, 'Farhan Rahman', 'farhan.rahman@example.com', 'APAC', now() - interval '46 days'),
    (47, 'Gita Sharma', 'gita.sharma@example.com', 'APAC', now() - interval '47 days'),
    (48, 'Hiro Sato', 'hiro.sato@example.com', 'APAC', now() - interval '48 days'),
    (49, 'Indah Putri', 'indah.putri@example.com', 'APAC', now() - interval '49 days'),
    (50, 'Jun Li', 'jun.li@example.com', 'APAC', now() - interval '50 days'),
    (51, 'Kenji Mori', 'kenji.mori@example.com', 'APAC', now() - interval '51 days'),
    (52, 'Lakshmi Rao', 'lakshmi.rao@example.com', 'APAC', now() - interval '52 days'),
    (53, 'Min-jun Kim', 'minjun.kim@example.com', 'APAC', now() - interval '53 days'),
    (54, 'Nalin Perera', 'nalin.perera@example.com', 'APAC', now() - interval '54 days'),
    (55, 'Priya Nair', 'priya.nair@example.com', 'APAC', now() - interval '55 days'),
    (56, 'Ravi Menon', 'ravi.menon@example.com', 'APAC', now() - interval '56 days'),
    (57, 'Siti Aminah', 'siti.aminah@example.com', 'APAC', now() - interval '57 days'),
    (58, 'Takeshi Ito', 'takeshi.ito@example.com', 'APAC', now() - interval '58 days'),
    (59, 'Utami Sari', 'utami.sari@example.com', 'APAC', now() - interval '59 days'),
    (60, 'Wei Zhang', 'wei.zhang@example.com', 'APAC', now() - interval '60 days');

-- Orders 1-40: pending, created 2 to 9 days ago (stuck).
-- Orders 41-50: pending, created within the last 6 hours (not stuck yet).
-- Orders 51-240: shipped or failed, at various dates.
INSERT INTO public.orders (id, customer_id, status, total_cents, created_at, updated_at)
SELECT i, 1 + (i * 7) % 60, 'pending', 1000 + (i * 379) % 90000,
       now() - interval '2 days' - (i % 8) * interval '1 day' - (i % 5) * interval '1 hour',
       now() - interval '2 days'
FROM generate_series(1, 40) AS i;
INSERT INTO public.orders (id, customer_id, status, total_cents, created_at, updated_at)
SELECT i, 1 + (i * 7) % 60, 'pending', 1000 + (i * 379) % 90000,
       now() - (i - 40) * interval '30 minutes', now() - (i - 40) * interval '30 minutes'
FROM generate_series(41, 50) AS i;
INSERT INTO public.orders (id, customer_id, status, total_cents, created_at, updated_at)
SELECT i, 1 + (i * 7) % 60, CASE WHEN i % 9 = 0 THEN 'failed' ELSE 'shipped' END, 1000 + (i * 379) % 90000,
       now() - (i % 90) * interval '1 day' - interval '10 days', now() - (i % 90) * interval '1 day'
FROM generate_series(51, 240) AS i;
