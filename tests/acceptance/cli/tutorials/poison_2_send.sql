-- Lesson 2: the shop sends an order that cannot be processed.
DECLARE @h UNIQUEIDENTIFIER
BEGIN DIALOG @h FROM SERVICE ShopService TO SERVICE 'OrderService' ON CONTRACT OrderContract
    WITH ENCRYPTION = OFF
SEND ON CONVERSATION @h MESSAGE TYPE OrderMessage (N'three')
